package stack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/healthlake-cdc/healthlake-cdc/internal/exportjob"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakeeventbridge"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
)

// HealthLake's job state events go to the account's default bus. The local
// bus has no rules, so the stack plays the one rule the CDK app deploys on
// it: source aws.healthlake, the export detail types of
// exportjob.JobEventDetailTypes, the stack's data store; target the
// re-check queue through exportjob's InputTransformer.

// healthLakeTick is how often the stack moves HealthLake's jobs on, so that
// a job finishes (and its event is sent) when the duration model says,
// not at the next request.
const healthLakeTick = 50 * time.Millisecond

// onJobEvent routes one HealthLake event as the stack's rule would.
func (s *Stack) onJobEvent(ev fakehealthlake.JobEvent) {
	var detail struct {
		DatastoreID string `json:"datastoreId"`
	}
	_ = json.Unmarshal(ev.Detail, &detail)
	if s.opts.NoJobEventRule || ev.Source != exportjob.JobEventSource || !slices.Contains(exportjob.JobEventDetailTypes, ev.DetailType) ||
		detail.DatastoreID != s.Res.DatastoreID || s.Res.RecheckQueueURL == "" {
		return
	}
	target := fakeeventbridge.Event{
		Version: "0", ID: fakeeventbridge.NewUUID(), DetailType: ev.DetailType, Source: ev.Source,
		Account: s.Env.AccountID, Time: ev.Time.UTC().Format("2006-01-02T15:04:05Z"), Region: s.Env.Region,
		Resources: ev.Resources, Detail: ev.Detail,
	}
	raw, err := json.Marshal(target)
	if err != nil {
		return
	}
	body, err := applyInputTransformer(exportjob.JobEventInputPathsMap, exportjob.JobEventInputTemplate, raw)
	if err != nil {
		s.log.Warn("HealthLake job event not routed", "error", err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.sqsc.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(s.Res.RecheckQueueURL), MessageBody: aws.String(string(body)),
	}); err != nil {
		s.log.Warn("HealthLake job event not delivered to the re-check queue", "error", err.Error())
	}
}

// startHealthLakeTicker moves HealthLake's jobs on every healthLakeTick
// until the stack closes.
func (s *Stack) startHealthLakeTicker() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(healthLakeTick)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.HealthLake.Tick(ctx)
			}
		}
	}()
	s.closers = append(s.closers, func() { cancel(); <-done })
}

// recordExportNotice adds the run's delay from export end to manifest (kept
// by check-export in the run's export ledger) to the report.
func (s *Stack) recordExportNotice(ctx context.Context, runID string) {
	entry, found, err := exportjob.NewLedger(s.ddb, s.Res.Table, time.Hour, nil).Get(ctx, runID)
	if err != nil || !found || entry.NoticeSeconds < 0 {
		return
	}
	s.Report.AddExportNotice(entry.NoticeSeconds)
}

// applyInputTransformer renders an EventBridge InputTransformer for one
// event: each InputPathsMap entry is a JSON path of dot-separated names
// ("$.detail.jobId", "$.detail-type") whose value replaces <name> in the
// template — as its JSON text where the placeholder stands alone, as the
// bare escaped string inside quotes ("…<name>…"). A path that matches
// nothing gives null (an empty string inside quotes).
func applyInputTransformer(paths map[string]string, template string, event []byte) ([]byte, error) {
	var ev any
	if err := json.Unmarshal(event, &ev); err != nil {
		return nil, fmt.Errorf("input transformer: event is not JSON: %w", err)
	}
	values := map[string]any{}
	for name, path := range paths {
		if !strings.HasPrefix(path, "$.") {
			return nil, fmt.Errorf("input transformer: path %q does not start with $.", path)
		}
		var cur any = ev
		for _, key := range strings.Split(path[2:], ".") {
			m, ok := cur.(map[string]any)
			if !ok {
				cur = nil
				break
			}
			cur = m[key]
		}
		values[name] = cur
	}
	var out bytes.Buffer
	inString := false
	for i := 0; i < len(template); i++ {
		c := template[i]
		if c == '"' && (i == 0 || template[i-1] != '\\') {
			inString = !inString
		}
		if c != '<' {
			out.WriteByte(c)
			continue
		}
		end := strings.IndexByte(template[i:], '>')
		name := ""
		if end > 0 {
			name = template[i+1 : i+end]
		}
		v, ok := values[name]
		if !ok {
			out.WriteByte(c)
			continue
		}
		if inString {
			str, isStr := v.(string)
			if !isStr && v != nil {
				b, _ := json.Marshal(v)
				str = string(b)
			}
			b, _ := json.Marshal(str)
			out.Write(b[1 : len(b)-1])
		} else {
			b, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("input transformer: %w", err)
			}
			out.Write(b)
		}
		i += end
	}
	return out.Bytes(), nil
}
