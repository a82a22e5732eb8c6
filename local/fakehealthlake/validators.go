package fakehealthlake

import "github.com/healthlake-cdc/healthlake-cdc/internal/fhir"

// validators holds one structural validator per resource type the emulator
// takes: every concrete R4 type, with golang-fhir-models' decoder (the table
// internal/fhir keeps), and the Subscription types HealthLake takes beyond R4
// (subscription_config.go's init).
var validators = r4Validators()

func r4Validators() map[string]func([]byte) error {
	out := map[string]func([]byte) error{}
	for _, t := range fhir.R4Types() {
		out[t], _ = fhir.R4Unmarshaler(t)
	}
	return out
}
