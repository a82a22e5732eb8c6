package stack

import (
	"context"
	"fmt"

	"github.com/healthlake-cdc/healthlake-cdc/internal/datastore"
	"github.com/healthlake-cdc/healthlake-cdc/internal/datastorecheck"
	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
)

// CheckDatastore makes the deploy's data store check (the custom resource
// DatastoreCheck, internal/datastorecheck) for a stack deployed with
// configuredKey as its DatastoreKey, signing as the check-datastore role:
// an error names what stops the pipeline on the data store. The stack runs
// it at start with the deployed configuration's key, before the
// Subscription and the schedules, as CloudFormation does before creating
// them.
func (s *Stack) CheckDatastore(ctx context.Context, configuredKey string) (datastore.Facts, error) {
	api := datastore.NewClient(s.principalConfig(iampolicy.CheckDatastore), s.Res.HealthLakeEndpoint)
	f, err := datastorecheck.Check(ctx, api, s.Env.Region,
		datastorecheck.Properties{DatastoreID: s.Res.DatastoreID, DatastoreKey: configuredKey})
	if err != nil {
		return f, fmt.Errorf("stack: the deploy's data store check: %w", err)
	}
	return f, nil
}
