package prepare

// ConcurrencyFor exposes Config.concurrencyFor to the external tests.
func ConcurrencyFor(c Config, configured int) int { return c.concurrencyFor(configured) }
