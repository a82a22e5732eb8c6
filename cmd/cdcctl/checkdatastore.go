package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/datastore"
	"github.com/healthlake-cdc/healthlake-cdc/internal/datastorecheck"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

func init() {
	register("check-datastore", command{
		summary: "before a deploy: would the stack's data store check pass for this data store and key?",
		run:     runCheckDatastore,
	})
}

// checkDatastoreView is the JSON form of `cdcctl check-datastore`.
type checkDatastoreView struct {
	DatastoreID        string    `json:"datastoreId"`
	Region             string    `json:"region"`
	DatastoreKey       string    `json:"datastoreKey,omitempty"`
	Status             string    `json:"status,omitempty"`
	CreatedAt          time.Time `json:"createdAt,omitzero"`
	CustomerManagedKey string    `json:"customerManagedKey,omitempty"`
	Passes             bool      `json:"passes"`
	Reason             string    `json:"reason,omitempty"`
}

// runCheckDatastore makes the deploy's data store check (the custom
// resource DatastoreCheck, internal/datastorecheck) with the caller's
// credentials, so that a platform engineer finds a misfit before
// CloudFormation does.
func runCheckDatastore(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, f := newAWSFlagSet("check-datastore", stderr)
	id := fs.String("datastore-id", os.Getenv(stackconfig.EnvDatastoreID), "the data store the stack is deployed for (the DatastoreId parameter; default $CDC_DATASTORE_ID)")
	key := fs.String("datastore-key", os.Getenv(stackconfig.EnvDatastoreKey), "the DatastoreKey setting the stack is deployed with (default $CDC_DATASTORE_KEY; empty: none)")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if strings.TrimSpace(*id) == "" {
		return fail(stderr, "check-datastore", "no data store: pass --datastore-id ID (the DatastoreId parameter) or set "+stackconfig.EnvDatastoreID)
	}
	cfg, err := f.awsConfig(ctx)
	if err != nil {
		return fail(stderr, "check-datastore", err.Error())
	}
	api := datastore.NewClient(cfg, "")
	p := datastorecheck.Properties{DatastoreID: strings.TrimSpace(*id), DatastoreKey: strings.TrimSpace(*key)}
	facts, cerr := datastorecheck.Check(ctx, api, cfg.Region, p)
	v := checkDatastoreView{DatastoreID: p.DatastoreID, Region: cfg.Region, DatastoreKey: p.DatastoreKey,
		Status: facts.Status, CreatedAt: facts.CreatedAt, CustomerManagedKey: facts.CustomerManagedKey, Passes: cerr == nil}
	if cerr != nil {
		v.Reason = cerr.Error()
	}
	if f.json {
		if werr := writeJSON(stdout, v); werr != nil {
			return fail(stderr, "check-datastore", werr.Error())
		}
	} else {
		fmt.Fprintf(stdout, "data store   %s (%s)\n", v.DatastoreID, v.Region)
		if v.Status != "" {
			key := "an AWS owned key"
			if v.CustomerManagedKey != "" {
				key = "the customer-managed key " + v.CustomerManagedKey
			}
			fmt.Fprintf(stdout, "status       %s, created %s, on %s\n", v.Status, v.CreatedAt.UTC().Format("2006-01-02"), key)
		}
		deployed := "none"
		if v.DatastoreKey != "" {
			deployed = v.DatastoreKey
		}
		fmt.Fprintf(stdout, "DatastoreKey %s\n", deployed)
	}
	if cerr != nil {
		return fail(stderr, "check-datastore", "the deploy's data store check would fail: "+cerr.Error())
	}
	if !f.json {
		fmt.Fprintln(stdout, "the deploy's data store check passes")
	}
	return exitOK
}
