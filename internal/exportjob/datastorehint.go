package exportjob

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/healthlake-cdc/healthlake-cdc/internal/datastore"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
)

// RefusalHint returns what in the data store's facts, compared with the key
// the stack was deployed for (configuredKey, the DatastoreKey setting),
// explains a refused export start, with what to do: "" when nothing does.
// It is datastore.Misfits, and, when denied says the refusal was an access
// denial and the data store's key is the one the stack was deployed for,
// that key's policy. It names data store properties only, never resource
// content.
func RefusalHint(f datastore.Facts, configuredKey string, denied bool) string {
	hints := datastore.Misfits(f, configuredKey)
	if key := f.CustomerManagedKey; denied && key != "" && configuredKey != "" && datastore.SameKey(key, configuredKey) {
		hints = append(hints, "the data store's key "+key+" is the stack's DatastoreKey: its key policy must let this account's IAM policies grant its use, or name the stack's roles (docs/DEPLOY.md, \"Prerequisites\")")
	}
	return strings.Join(hints, "; ")
}

// datastoreHint describes the data store and returns RefusalHint's
// explanation of HealthLake's refusal; "" when the data store cannot be
// described (logged) or nothing explains the refusal.
func (h *StartHandler) datastoreHint(ctx context.Context, log *slog.Logger, refusal error) string {
	if h.d.Datastores == nil {
		return ""
	}
	f, err := datastore.Describe(ctx, h.d.Datastores, h.cfg.DatastoreID)
	if err != nil {
		log.WarnContext(ctx, "data store not described after a refused export", "error", err.Error())
		return ""
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
