package localaws

import (
	"sort"
	"strings"
	"sync"

	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
)

// PrincipalAccessKeyID returns the local access key id of a named principal
// (for example "start-export"): AKIDLOCAL followed by the name in capitals
// without punctuation.
func PrincipalAccessKeyID(name string) string {
	var b strings.Builder
	b.WriteString(principalKeyPrefix)
	for _, r := range strings.ToUpper(name) {
		if r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

const principalKeyPrefix = "AKIDLOCAL"

// IsPrincipalAccessKeyID reports whether id is a principal's key (one of the
// stack's roles), not an administrator's.
func IsPrincipalAccessKeyID(id string) bool {
	return strings.HasPrefix(id, principalKeyPrefix) && id != AccessKeyID
}

// PrincipalSecretAccessKey returns the secret of a principal's local access
// key: "local-secret-" followed by the key id's suffix in lower case (for
// AKIDLOCALSTARTEXPORT, local-secret-startexport). Like the key ids, the
// secrets are fixed, so that a user can sign as any principal (docs/LOCAL.md,
// "Access keys").
func PrincipalSecretAccessKey(accessKeyID string) string {
	return "local-secret-" + strings.ToLower(strings.TrimPrefix(accessKeyID, principalKeyPrefix))
}

// AccessKey is one local access key pair.
type AccessKey struct {
	// Principal names whose key it is ("admin" for the administrators).
	Principal                    string
	AccessKeyID, SecretAccessKey string
}

// DefaultAccessKeys are the keys every Env knows from the start: the two
// administrators' (AccessKeyID, and the conventional test/test) and one per
// principal of the stack (internal/iampolicy.All), in that order.
func DefaultAccessKeys() []AccessKey {
	keys := []AccessKey{
		{Principal: "admin", AccessKeyID: AccessKeyID, SecretAccessKey: SecretAccessKey},
		{Principal: "admin", AccessKeyID: ConventionalAccessKeyID, SecretAccessKey: ConventionalSecretAccessKey},
	}
	for _, p := range iampolicy.All() {
		id := PrincipalAccessKeyID(string(p))
		keys = append(keys, AccessKey{Principal: string(p), AccessKeyID: id, SecretAccessKey: PrincipalSecretAccessKey(id)})
	}
	return keys
}

// keyStore maps access key ids to secrets.
type keyStore struct {
	mu      sync.RWMutex
	secrets map[string]string
}

func newKeyStore() *keyStore {
	ks := &keyStore{secrets: map[string]string{}}
	for _, k := range DefaultAccessKeys() {
		ks.secrets[k.AccessKeyID] = k.SecretAccessKey
	}
	return ks
}

func (ks *keyStore) secret(id string) (string, bool) {
	ks.mu.RLock()
	defer ks.mu.RUnlock()
	s, ok := ks.secrets[id]
	return s, ok
}

func (ks *keyStore) add(id, secret string) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	ks.secrets[id] = secret
}

func (ks *keyStore) ids() []string {
	ks.mu.RLock()
	defer ks.mu.RUnlock()
	out := make([]string, 0, len(ks.secrets))
	for id := range ks.secrets {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}
