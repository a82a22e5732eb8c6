package pipeline

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// TestFIPSEndpointsSetting: by default no function is told to use FIPS
// endpoints and the HealthLake endpoint the functions are given is the
// Regional host; with the FIPSEndpoints setting (and the fast path, whose
// two functions are built apart) every function of the stack gets the
// SDK's AWS_USE_FIPS_ENDPOINT=true and every HealthLake endpoint is the
// healthlake-fips host. A stack whose Region is known at synth and has no
// HealthLake FIPS endpoint is refused, naming the Regions that have one.
func TestFIPSEndpointsSetting(t *testing.T) {
	synth := func(settings map[string]string) map[string]any {
		set := DefaultSettings()
		if err := set.Apply(settings); err != nil {
			t.Fatal(err)
		}
		_, tpl := synthProps(t, Props{Name: "p", LambdaDir: fastPathLambdaDir(t), ASLFile: realASL, Settings: &set,
			DatastoreID: jsii.String("ds-1"), ResourceTypes: jsii.String("Patient,Observation")})
		return tpl
	}
	def := synth(map[string]string{"FastPath": "true"})
	fips := synth(map[string]string{"FastPath": "true", "FIPSEndpoints": "true"})
	check := func(name string, tpl map[string]any, fips bool) {
		fns := resourcesOf(tpl, "AWS::Lambda::Function")
		if len(fns) < 8 {
			t.Fatalf("%s: %d functions, want the pipeline's 6 and the fast path's 2", name, len(fns))
		}
		endpoints := 0
		for id, f := range fns {
			vars, _ := f["Properties"].(map[string]any)["Environment"].(map[string]any)["Variables"].(map[string]any)
			if got, ok := vars["AWS_USE_FIPS_ENDPOINT"]; fips != (ok && got == "true") {
				t.Errorf("%s: function %s: AWS_USE_FIPS_ENDPOINT %v, want it %v", name, id, got, fips)
			}
			ep, ok := vars["CDC_HEALTHLAKE_ENDPOINT"]
			if !ok {
				continue
			}
			endpoints++
			want := `"https://healthlake.${AWS::Region}.${AWS::URLSuffix}"`
			if fips {
				want = `"https://healthlake-fips.${AWS::Region}.${AWS::URLSuffix}"`
			}
			if !strings.Contains(js(ep), want) {
				t.Errorf("%s: function %s: CDC_HEALTHLAKE_ENDPOINT %s, want %s", name, id, js(ep), want)
			}
		}
		if endpoints < 6 {
			t.Errorf("%s: %d functions are given a HealthLake endpoint, want every caller's", name, endpoints)
		}
	}
	check("default", def, false)
	check("FIPSEndpoints", fips, true)

	set := DefaultSettings()
	if err := set.Apply(map[string]string{"FIPSEndpoints": "true"}); err != nil {
		t.Fatal(err)
	}
	for region, refused := range map[string]bool{"eu-west-1": true, "us-east-2": false} {
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(t.TempDir(), "cdk.out"))})
		stack := awscdk.NewStack(app, jsii.String("S"), &awscdk.StackProps{Env: &awscdk.Environment{Account: jsii.String("111122223333"), Region: jsii.String(region)}})
		_, err := New(stack, "Cdc", Props{Name: "p", LambdaDir: fakeLambdaDir(t), ASLFile: realASL, Settings: &set, DatastoreID: jsii.String("ds-1")})
		if refused != (err != nil) || (refused && !strings.Contains(err.Error(), "HealthLake has no FIPS endpoint in eu-west-1, only in us-east-1, us-east-2, us-west-2")) {
			t.Errorf("FIPSEndpoints in %s: %v, want refused %v", region, err, refused)
		}
	}
}
