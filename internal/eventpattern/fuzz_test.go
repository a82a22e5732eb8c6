package eventpattern

import (
	"errors"
	"testing"
)

// FuzzParseMatch feeds arbitrary patterns and events to the package: it
// must never panic, Match must never accept (or match with) a pattern that
// Validate refuses, a refusal is always an *InvalidError, and Match agrees
// with Parse and Matches.
func FuzzParseMatch(f *testing.F) {
	seeds := [][2]string{
		{`{"source":["aws.ec2"]}`, `{"source":"aws.ec2"}`},
		{`{"detail":{"state":[{"anything-but":{"prefix":["init","test"]}}]}}`, `{"detail":{"state":null}}`},
		{`{"detail.operation":["delete"]}`, `{"detail":{"operation":"delete"}}`},
		{`{"detail":{"operation":["delete"]}}`, `{"detail.operation":"delete"}`},
		{`{"k":[{"wildcard":"*a*b*c*d*e*f*g*h*i*j*"}]}`, `{"k":"abcdefghij"}`},
		{`{"$or":[{"a":[{"exists":false}]},{"a":["x"]}]}`, `{"b":1}`},
		{`{"n":[{"numeric":[">",0,"<=",5]}]}`, `{"n":[1,"2",{"x":3}]}`},
		{`{"ip":[{"cidr":"10.0.0.0/24"}]}`, `{"ip":"10.0.0.7"}`},
		{`{"a.":[""],".b":[{"suffix":"x"}]}`, `{"a..b":{"":1}}`},
		{`{"s":[{"anything-but":{"wildcard":["*/lib/*","a\\*"]}}]}`, `{"s":"/usr/lib/x"}`},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, event string) {
		verr := Validate(pattern)
		got, merr := Match(pattern, event)
		if verr != nil {
			var ie *InvalidError
			if !errors.As(verr, &ie) {
				t.Fatalf("Validate(%q) = %v, not an *InvalidError", pattern, verr)
			}
			if got || merr == nil {
				t.Fatalf("Validate(%q) refused it (%v) but Match(…, %q) = %v, %v", pattern, verr, event, got, merr)
			}
			return
		}
		p, err := Parse(pattern)
		if err != nil {
			t.Fatalf("Validate(%q) accepted it but Parse refused: %v", pattern, err)
		}
		want, werr := p.Matches([]byte(event))
		if got != want || (merr == nil) != (werr == nil) {
			t.Fatalf("Match(%q, %q) = %v, %v; Parse+Matches = %v, %v", pattern, event, got, merr, want, werr)
		}
		if merr != nil && got {
			t.Fatalf("Match(%q, %q) matched with an error %v", pattern, event, merr)
		}
	})
}
