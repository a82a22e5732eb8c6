package main

import (
	"strings"
	"testing"
)

// testClaimCheckReaders are the other accounts the FastPath synth lets read
// claim-checks (fastPathTemplate).
var testClaimCheckReaders = []string{"111122223333", "444455556666"}

// claimCheckReaderStatements returns the bucket policy's and the key
// policy's statements with the Sid ClaimCheckReaders in the current
// template.
func claimCheckReaderStatements() (bucket, key []statement) {
	for _, s := range statements() {
		if s.Raw["Sid"] != "ClaimCheckReaders" {
			continue
		}
		switch s.ResourceType {
		case "AWS::S3::BucketPolicy":
			bucket = append(bucket, s)
		case "AWS::KMS::Key":
			key = append(key, s)
		}
	}
	return bucket, key
}

// Consumers in other accounts resolve claim-checks only where the stack
// names their accounts: then the bucket policy lets those accounts
// s3:GetObject under claim-check/ and nothing else, and the key policy lets
// them kms:Decrypt only through S3 in the stack's Region.
// By default neither policy names another account.
func TestClaimCheckReadersInOtherAccounts(t *testing.T) {
	if b, k := claimCheckReaderStatements(); len(b)+len(k) != 0 {
		t.Errorf("default stack: claim-check readers %v %v", b, k)
	}
	for _, s := range statements() {
		if s.ResourceType == "AWS::S3::BucketPolicy" || s.ResourceType == "AWS::KMS::Key" {
			if p := flatten(s.Raw["Principal"]); strings.Contains(p, "111122223333") {
				t.Errorf("default stack: %s %s names another account: %s", s.ResourceType, s.Owner, p)
			}
		}
	}
	onFastPath(t, func() {
		b, k := claimCheckReaderStatements()
		if len(b) != 1 || len(k) != 1 {
			t.Fatalf("claim-check reader statements: bucket %d, key %d, want 1 each", len(b), len(k))
		}
		for _, s := range append(b, k...) {
			p := flatten(s.Raw["Principal"])
			for _, a := range testClaimCheckReaders {
				if !strings.Contains(p, ":iam::"+a+":root") {
					t.Errorf("%s: principal %s lacks account %s", s.ResourceType, p, a)
				}
			}
			if s.Effect != "Allow" {
				t.Errorf("%s: %s", s.ResourceType, s.Effect)
			}
		}
		bs := b[0]
		if strings.Join(bs.Actions, ",") != "s3:GetObject" || len(bs.Resources) != 1 || !strings.HasSuffix(flatten(bs.Resources[0]), "/"+PrefixClaimCheck+"*") {
			t.Errorf("bucket policy: %v on %v, want s3:GetObject on claim-check/* only", bs.Actions, bs.Resources)
		}
		ks := k[0]
		if strings.Join(ks.Actions, ",") != "kms:Decrypt" {
			t.Errorf("key policy: %v, want kms:Decrypt only", ks.Actions)
		}
		cond := flatten(ks.Raw["Condition"])
		for _, want := range []string{"kms:ViaService", "s3.${AWS::Region}.amazonaws.com"} {
			if !strings.Contains(cond, want) {
				t.Errorf("key policy condition %s lacks %s", cond, want)
			}
		}
	})
}

func TestClaimCheckReadersSetting(t *testing.T) {
	lookup := func(v string) func(string) any {
		return func(k string) any {
			if k == ContextClaimCheckReaders {
				return v
			}
			return nil
		}
	}
	cfg, err := ConfigFromContext(lookup("111122223333, 444455556666"))
	if err != nil || strings.Join(cfg.ClaimCheckReaders, " ") != "111122223333 444455556666" {
		t.Fatalf("ConfigFromContext: %v, %v", cfg.ClaimCheckReaders, err)
	}
	if err := cfg.validateValues(); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"12345", "111122223333,111122223333", "arn:aws:iam::111122223333:root",
		strings.Repeat("111122223333,", 21) + "1"} {
		cfg, _ := ConfigFromContext(lookup(bad))
		if err := cfg.validateValues(); err == nil || !strings.Contains(err.Error(), ContextClaimCheckReaders) {
			t.Errorf("%q: %v, want an error naming -c %s", bad, err, ContextClaimCheckReaders)
		}
	}
}
