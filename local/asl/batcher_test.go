package asl

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// batchDef is a Distributed Map over $.items whose children echo their
// input (a Pass state), with the given ItemBatcher and extra Map fields.
func batchDef(batcher, extra string) string {
	return `{"StartAt":"M","States":{"M":{"Type":"Map","ItemsPath":"$.items",
	  "ItemProcessor":{"ProcessorConfig":{"Mode":"DISTRIBUTED","ExecutionType":"EXPRESS"},
	     "StartAt":"P","States":{"P":{"Type":"Pass","End":true}}},
	  "ItemBatcher":` + batcher + extra + `,"End":true}}}`
}

func TestItemBatcherByCountWithBatchInputAndItemSelector(t *testing.T) {
	def := batchDef(`{"MaxItemsPerBatch":3,"BatchInput":{"run.$":"$.run","exec.$":"$$.Execution.Name","fixed":"x","n.$":"States.ArrayLength($.items)"}}`,
		`,"ItemSelector":{"v.$":"$$.Map.Item.Value","i.$":"$$.Map.Item.Index","run.$":"$.run"}`)
	info := runDef(t, Config{}, def, `{"run":"r7","items":["a","b","c","d","e","f","g"]}`)
	if info.Status != StatusSucceeded {
		t.Fatalf("got %+v", info)
	}
	// ItemSelector runs per item (with that item's $$.Map.Item); BatchInput's
	// paths resolve once against the Map state's input and context object.
	bi := `"BatchInput":{"run":"r7","exec":"run-1","fixed":"x","n":7}`
	item := func(i int) string { return fmt.Sprintf(`{"v":"%c","i":%d,"run":"r7"}`, 'a'+i, i) }
	jsonEq(t, "map output", info.Output, `[`+
		`{`+bi+`,"Items":[`+item(0)+`,`+item(1)+`,`+item(2)+`]},`+
		`{`+bi+`,"Items":[`+item(3)+`,`+item(4)+`,`+item(5)+`]},`+
		`{`+bi+`,"Items":[`+item(6)+`]}]`)
}

func TestItemBatcherWithoutBatchInputHasOnlyItems(t *testing.T) {
	info := runDef(t, Config{}, batchDef(`{"MaxItemsPerBatchPath":"$.per"}`, ""), `{"per":2,"items":[1,2,3]}`)
	if info.Status != StatusSucceeded {
		t.Fatalf("got %+v", info)
	}
	jsonEq(t, "map output", info.Output, `[{"Items":[1,2]},{"Items":[3]}]`)
}

func TestItemBatcherByBytes(t *testing.T) {
	// Each item "xxxxxxxx" encodes to 10 bytes; {"Items":[]} is 12 and every
	// item after the first adds a comma: 1 item = 22 bytes, 2 = 33, 3 = 44.
	items := `["xxxxxxxx","xxxxxxxx","xxxxxxxx","xxxxxxxx","xxxxxxxx"]`
	for _, tc := range []struct {
		name, batcher, input string
		want                 []int
	}{
		{"limit 40", `{"MaxInputBytesPerBatch":40}`, `{"items":` + items + `}`, []int{2, 2, 1}},
		{"limit 44 exactly fits 3", `{"MaxInputBytesPerBatch":44}`, `{"items":` + items + `}`, []int{3, 2}},
		{"count and bytes, the smaller wins", `{"MaxInputBytesPerBatch":44,"MaxItemsPerBatch":2}`, `{"items":` + items + `}`, []int{2, 2, 1}},
		{"limit from a path", `{"MaxInputBytesPerBatchPath":"$.max"}`, `{"max":33,"items":` + items + `}`, []int{2, 2, 1}},
		// {"BatchInput":{"k":"v"},"Items":[]} is 35 bytes: 1 item = 45, 2 = 56, 3 = 67.
		{"BatchInput counts", `{"MaxInputBytesPerBatch":60,"BatchInput":{"k":"v"}}`, `{"items":` + items + `}`, []int{2, 2, 1}},
		// An item larger than the limit on its own travels alone.
		{"oversized item alone", `{"MaxInputBytesPerBatch":30}`, `{"items":["xxxxxxxx","` + strings.Repeat("y", 40) + `","xxxxxxxx"]}`, []int{1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info := runDef(t, Config{}, batchDef(tc.batcher, ""), tc.input)
			if info.Status != StatusSucceeded {
				t.Fatalf("got %+v", info)
			}
			var batches []json.RawMessage
			if err := json.Unmarshal([]byte(info.Output), &batches); err != nil {
				t.Fatal(err)
			}
			var got []int
			limit := map[string]int{"limit 40": 40, "limit 44 exactly fits 3": 44, "count and bytes, the smaller wins": 44, "limit from a path": 33, "BatchInput counts": 60}[tc.name]
			for _, raw := range batches {
				var b struct{ Items []any }
				if err := json.Unmarshal(raw, &b); err != nil {
					t.Fatal(err)
				}
				got = append(got, len(b.Items))
				if limit > 0 && len(raw) > limit {
					t.Errorf("batch %s is %d bytes, over %d", raw, len(raw), limit)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("batch sizes %v, want %v", got, tc.want)
			}
		})
	}
}

func TestItemBatcherWithoutByteLimitKeepsBatchesUnder256KiB(t *testing.T) {
	// The ItemSelector doubles each 50 KB item: 2 selected items fit in
	// 256 KiB, 3 do not.
	def := `{"StartAt":"M","States":{"M":{"Type":"Map","ItemsPath":"$.items",
	  "ItemSelector":{"a.$":"$$.Map.Item.Value","b.$":"$$.Map.Item.Value"},
	  "ItemProcessor":{"ProcessorConfig":{"Mode":"DISTRIBUTED","ExecutionType":"EXPRESS"},
	     "StartAt":"P","States":{"P":{"Type":"Pass","Parameters":{"n.$":"States.ArrayLength($.Items)"},"End":true}}},
	  "ItemBatcher":{"MaxItemsPerBatch":1000},"End":true}}}`
	z := `"` + strings.Repeat("z", 50<<10) + `"`
	info := runDef(t, Config{}, def, `{"items":[`+z+`,`+z+`,`+z+`]}`)
	if info.Status != StatusSucceeded {
		t.Fatalf("got %+v", info)
	}
	jsonEq(t, "map output", info.Output, `[{"n":2},{"n":1}]`)
}

func TestItemBatcherToleratedFailuresCountItemsAndResultWriterHasOneEntryPerChild(t *testing.T) {
	tasks := taskFunc(func(_ context.Context, c TaskCall) (any, error) {
		p := c.Parameters.(map[string]any)
		for _, it := range p["Items"].([]any) {
			if it == "bad" {
				return nil, &Error{Name: "Batch.Failed", Cause: "a bad item"}
			}
		}
		return map[string]any{"n": len(p["Items"].([]any))}, nil
	})
	def := func(tolerance string) string {
		return `{"StartAt":"M","States":{"M":{"Type":"Map","ItemsPath":"$.items",
		  "ItemProcessor":{"ProcessorConfig":{"Mode":"DISTRIBUTED","ExecutionType":"STANDARD"},
		     "StartAt":"T","States":{"T":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke","End":true}}},
		  "ItemBatcher":{"MaxItemsPerBatch":2},` + tolerance + `,
		  "ResultWriter":{"Resource":"arn:aws:states:::s3:putObject","Parameters":{"Bucket":"b","Prefix":"res"}},
		  "End":true}}}`
	}
	// 5 items in batches of 2, 2, 1; the first batch fails: 2 of 5 items (40 %).
	input := `{"items":["bad","a","b","c","d"]}`
	for _, tc := range []struct {
		tolerance string
		ok        bool
	}{
		{`"ToleratedFailureCount":1`, false},
		{`"ToleratedFailureCount":2`, true},
		{`"ToleratedFailurePercentage":39`, false},
		{`"ToleratedFailurePercentage":40`, true},
	} {
		store := newMemStore()
		var mu sync.Mutex
		var children int
		cfg := Config{Tasks: tasks, Objects: store, OnChildExecution: func(*Execution) { mu.Lock(); children++; mu.Unlock() }}
		info := runDef(t, cfg, def(tc.tolerance), input)
		if tc.ok != (info.Status == StatusSucceeded) || (!tc.ok && info.Error != ErrorExceedToleratedFailure) {
			t.Fatalf("%s: got %+v", tc.tolerance, info)
		}
		if !tc.ok && !strings.Contains(info.Cause, "2 of 5 items") {
			t.Errorf("%s: cause %q", tc.tolerance, info.Cause)
		}
		// Past the threshold no further child starts, so a failed run may
		// have started fewer than the 3 batches.
		if (tc.ok && children != 3) || children < 1 || children > 3 {
			t.Fatalf("%s: %d child executions, want 3 (one per batch)", tc.tolerance, children)
		}
		var succeeded, failed []map[string]any
		for k, body := range store.objects {
			switch {
			case strings.HasSuffix(k, "/SUCCEEDED_0.json"):
				_ = json.Unmarshal(body, &succeeded)
			case strings.HasSuffix(k, "/FAILED_0.json"):
				_ = json.Unmarshal(body, &failed)
			}
		}
		if len(succeeded)+len(failed) != children || len(failed) != 1 {
			t.Fatalf("%s: %d succeeded and %d failed result entries for %d children, want one entry per child", tc.tolerance, len(succeeded), len(failed), children)
		}
		jsonEq(t, "failed entry input", failed[0]["Input"].(string), `{"Items":["bad","a"]}`)
		if tc.ok {
			outs := []string{succeeded[0]["Output"].(string), succeeded[1]["Output"].(string)}
			if !(outs[0] == `{"n":2}` && outs[1] == `{"n":1}` || outs[0] == `{"n":1}` && outs[1] == `{"n":2}`) {
				t.Fatalf("%s: succeeded outputs %v", tc.tolerance, outs)
			}
		}
	}
}

func TestItemBatcherRuntimeErrors(t *testing.T) {
	for name, tc := range map[string]struct{ batcher, input string }{
		"items path zero":     {`{"MaxItemsPerBatchPath":"$.n"}`, `{"n":0,"items":[1]}`},
		"items path string":   {`{"MaxItemsPerBatchPath":"$.n"}`, `{"n":"2","items":[1]}`},
		"bytes path too big":  {`{"MaxInputBytesPerBatchPath":"$.n"}`, `{"n":262145,"items":[1]}`},
		"batch input missing": {`{"MaxItemsPerBatch":2,"BatchInput":{"x.$":"$.missing"}}`, `{"items":[1]}`},
	} {
		info := runDef(t, Config{}, batchDef(tc.batcher, ""), tc.input)
		if info.Status != StatusFailed || info.Error != ErrorRuntime {
			t.Errorf("%s: got %+v", name, info)
		}
	}
}

func TestItemBatcherDefinitionErrors(t *testing.T) {
	for name, batcher := range map[string]string{
		"no limit":            `{}`,
		"only BatchInput":     `{"BatchInput":{"a":1}}`,
		"count and path":      `{"MaxItemsPerBatch":2,"MaxItemsPerBatchPath":"$.n"}`,
		"bytes and path":      `{"MaxInputBytesPerBatch":2,"MaxInputBytesPerBatchPath":"$.n"}`,
		"zero count":          `{"MaxItemsPerBatch":0}`,
		"fractional count":    `{"MaxItemsPerBatch":1.5}`,
		"bytes over 256 KiB":  `{"MaxInputBytesPerBatch":262145}`,
		"unknown field":       `{"MaxItemsPerBatch":2,"MaxItems":3}`,
		"BatchInput an array": `{"MaxItemsPerBatch":2,"BatchInput":[1]}`,
		"not an object":       `5`,
	} {
		if _, err := ParseDefinition([]byte(batchDef(batcher, ""))); err == nil || !strings.Contains(err.Error(), "ItemBatcher") {
			t.Errorf("%s: ParseDefinition gave %v", name, err)
		}
	}
	inline := `{"StartAt":"M","States":{"M":{"Type":"Map","ItemsPath":"$.items",
	  "ItemProcessor":{"StartAt":"P","States":{"P":{"Type":"Pass","End":true}}},
	  "ItemBatcher":{"MaxItemsPerBatch":2},"End":true}}}`
	if _, err := ParseDefinition([]byte(inline)); err == nil || !strings.Contains(err.Error(), "DISTRIBUTED") {
		t.Errorf("ItemBatcher on an INLINE Map: %v", err)
	}
	if _, err := ParseDefinition([]byte(batchDef(`{"MaxInputBytesPerBatch":262144,"MaxItemsPerBatchPath":"$.n"}`, ""))); err != nil {
		t.Errorf("a valid ItemBatcher was refused: %v", err)
	}
}
