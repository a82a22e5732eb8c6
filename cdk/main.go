// Command cdk is the healthlake-cdc CDK app: `go run .` (or `cdk synth`)
// synthesizes the whole pipeline into cdk.out without any AWS call.
package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

func main() {
	silenceNodeWarning()
	// `make synth` runs `go run . synth`; the argument is accepted and ignored.
	if len(os.Args) > 1 && os.Args[1] != "synth" {
		fmt.Fprintf(os.Stderr, "usage: go run . [synth]\n")
		os.Exit(2)
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cdk:", err)
		os.Exit(1)
	}
}

func run() error {
	defer jsii.Close()
	props := &awscdk.AppProps{}
	// Without the CDK CLI (which sets CDK_OUTDIR and passes cdk.json's
	// context), write to ./cdk.out and read cdk.json's context ourselves.
	if os.Getenv("CDK_OUTDIR") == "" {
		props.Outdir = jsii.String("cdk.out")
		if ctx := readCDKJSONContext("cdk.json"); ctx != nil {
			m := map[string]any(ctx)
			props.Context = &m
		}
	}
	app := awscdk.NewApp(props)
	ApplyNagPacks(app)
	cfg, err := ConfigFromContext(func(k string) any { return app.Node().TryGetContext(jsii.String(k)) })
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg.Region = os.Getenv("CDK_DEFAULT_REGION")
	if _, err := NewPipelineStack(app, cfg, &awscdk.StackProps{
		// Environment-agnostic on purpose: account and region come from the
		// credentials used at `cdk deploy` and appear in the template only as
		// AWS::AccountId / AWS::Region.
		Synthesizer: awscdk.NewDefaultStackSynthesizer(nil),
	}); err != nil {
		return err
	}
	app.Synth(nil)
	return nil
}
