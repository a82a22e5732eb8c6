package runlock

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
)

// redactKeyBytes is the length of the per-deployment key of Redact.
const redactKeyBytes = 32

// newRedactKey returns a fresh random key. It is stored once in RUN/STATE
// (attribute redactKey) and never changes, so equal identifiers hash alike
// across runs.
func newRedactKey() ([]byte, error) {
	k := make([]byte, redactKeyBytes)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	return k, nil
}

// Redact replaces what may be a resource identifier in text with a keyed
// hash "[id:xxxxxxxxxxxx]" (the first 48 bits of HMAC-SHA256 under key), so
// a stored failure reason can still tell two ids apart without holding
// either. A token (a run of letters, digits and "-._:/@#|+") is hashed when
// it is a FHIR reference ("Patient/…", also "Patient/…/_history/2"), or when
// it holds a digit and is at least 8 characters long (UUIDs, MRNs, long
// numbers), unless it is an ARN or an RFC 3339 time. Error names, counts and
// short numbers stay. With no key the token becomes "[id]".
func Redact(key []byte, text string) string {
	var b strings.Builder
	i := 0
	for i < len(text) {
		if !tokenByte(text[i]) {
			b.WriteByte(text[i])
			i++
			continue
		}
		j := i
		for j < len(text) && tokenByte(text[j]) {
			j++
		}
		tok := text[i:j]
		// Trailing sentence punctuation is not part of an identifier.
		trail := len(tok)
		for trail > 0 && strings.ContainsRune(".:", rune(tok[trail-1])) {
			trail--
		}
		if identifier(tok[:trail]) {
			b.WriteString(hashToken(key, tok[:trail]))
			b.WriteString(tok[trail:])
		} else {
			b.WriteString(tok)
		}
		i = j
	}
	return b.String()
}

func tokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._:/@#|+", c) >= 0 ||
		c >= 0x80 // multi-byte runes stay inside a token
}

// identifier reports whether tok may identify a resource.
func identifier(tok string) bool {
	if tok == "" || strings.HasPrefix(tok, "arn:") {
		return false
	}
	if slash := strings.IndexByte(tok, '/'); slash > 1 && slash < len(tok)-1 {
		head := tok[:slash]
		if unicode.IsUpper(rune(head[0])) && strings.IndexFunc(head, func(r rune) bool { return !unicode.IsLetter(r) }) < 0 {
			return true // a FHIR reference Type/id
		}
	}
	if len(tok) < 8 || strings.IndexFunc(tok, unicode.IsDigit) < 0 {
		return false
	}
	if _, err := envelope.ParseTime(tok); err == nil {
		return false
	}
	return true
}

func hashToken(key []byte, tok string) string {
	if len(key) == 0 {
		return "[id]"
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(tok))
	return "[id:" + hex.EncodeToString(m.Sum(nil)[:6]) + "]"
}
