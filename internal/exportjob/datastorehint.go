package exportjob

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	hlsdk "github.com/aws/aws-sdk-go-v2/service/healthlake"
	hltypes "github.com/aws/aws-sdk-go-v2/service/healthlake/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
)

// DatastoreFacts are what DescribeFHIRDatastore says of the data store that
// can explain why HealthLake refused an export start.
type DatastoreFacts struct {
	// Status is the data store's status (ACTIVE, CREATING, DELETING, …).
	Status string
	// CreatedAt is when the data store was created.
	CreatedAt time.Time
	// CustomerManagedKey is the ARN (or id) of the customer-managed KMS key
	// the data store is encrypted with; empty for an AWS owned key.
	CustomerManagedKey string
}

// SinceExportsFrom is the first creation date of a data store that exports
// with `_since`: those created before 2023-06-01 support only system-wide
// REST export (docs/DEPLOY.md, "Prerequisites").
var SinceExportsFrom = time.Date(2023, 6, 1, 0, 0, 0, 0, time.UTC)

// RefusalHint returns what in the data store's facts, compared with the key
// the stack was deployed for (configuredKey, the DatastoreKey setting),
// explains a refused export start, with what to do: "" when nothing does.
// denied says the refusal was an access denial: only then is the key the
// stack was deployed for suspected (its policy). It names data store
// properties only, never resource content.
func RefusalHint(f DatastoreFacts, configuredKey string, denied bool) string {
	var hints []string
	if f.Status != "" && f.Status != string(hltypes.DatastoreStatusActive) {
		hints = append(hints, "the data store is "+f.Status+", not ACTIVE")
	}
	if !f.CreatedAt.IsZero() && f.CreatedAt.Before(SinceExportsFrom) {
		hints = append(hints, "the data store was created on "+f.CreatedAt.UTC().Format("2006-01-02")+
			", before HealthLake's exports with _since (data stores created from 2023-06-01): use a newer data store")
	}
	switch key := f.CustomerManagedKey; {
	case key == "":
	case configuredKey == "":
		hints = append(hints, "the data store is encrypted with the customer-managed key "+key+
			" and the stack was deployed without the DatastoreKey setting: deploy with DatastoreKey="+key+" (docs/DEPLOY.md, \"Prerequisites\")")
	case !sameKey(key, configuredKey):
		hints = append(hints, "the data store is encrypted with the customer-managed key "+key+
			" but the stack's DatastoreKey is "+configuredKey+": deploy with DatastoreKey="+key+" (docs/DEPLOY.md, \"Prerequisites\")")
	case denied:
		hints = append(hints, "the data store's key "+key+" is the stack's DatastoreKey: its key policy must let this account's IAM policies grant its use, or name the stack's roles (docs/DEPLOY.md, \"Prerequisites\")")
	}
	return strings.Join(hints, "; ")
}

// sameKey reports whether two key references name the same key: equal, or
// one an ARN ending in the other's key id.
func sameKey(a, b string) bool {
	return a == b || strings.HasSuffix(a, ":key/"+b) || strings.HasSuffix(b, ":key/"+a)
}

// datastoreHint describes the data store and returns RefusalHint's
// explanation of HealthLake's refusal; "" when the data store cannot be
// described (logged) or nothing explains the refusal.
func (h *StartHandler) datastoreHint(ctx context.Context, log *slog.Logger, refusal error) string {
	if h.d.Datastores == nil {
		return ""
	}
	out, err := h.d.Datastores.DescribeFHIRDatastore(ctx, &hlsdk.DescribeFHIRDatastoreInput{DatastoreId: aws.String(h.cfg.DatastoreID)})
	if err != nil || out.DatastoreProperties == nil {
		if err != nil {
			log.WarnContext(ctx, "data store not described after a refused export", "error", err.Error())
		}
		return ""
	}
	p := out.DatastoreProperties
	f := DatastoreFacts{Status: string(p.DatastoreStatus), CreatedAt: aws.ToTime(p.CreatedAt)}
	if sse := p.SseConfiguration; sse != nil && sse.KmsEncryptionConfig != nil &&
		sse.KmsEncryptionConfig.CmkType == hltypes.CmkTypeCmCmk {
		f.CustomerManagedKey = aws.ToString(sse.KmsEncryptionConfig.KmsKeyId)
	}
	return RefusalHint(f, h.cfg.DatastoreKey, accessDenied(refusal))
}

// accessDenied reports whether HealthLake's refusal err is an access
// denial: HTTP 403, or an error naming AccessDenied or KMS.
func accessDenied(err error) bool {
	if err == nil {
		return false
	}
	var api *fhirrest.APIError
	if errors.As(err, &api) && api.StatusCode == http.StatusForbidden {
		return true
	}
	text := strings.ToLower(err.Error())
	return strings.Contains(text, "accessdenied") || strings.Contains(text, "kms")
}
