package fakeeventbridge

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestMarshalEventWritesTheDetailAsItIs: the envelope a rule target gets
// holds the compacted detail byte for byte, in EventBridge's member order,
// whatever the strings around it hold (a source or detail containing the
// text `,"detail":0`, HTML characters left as they are).
func TestMarshalEventWritesTheDetailAsItIs(t *testing.T) {
	detail, ok := compactObject(` { "a" : "x,\"detail\":0 <&>", "n": [1, 2] } `)
	if !ok {
		t.Fatal("detail refused")
	}
	ev := Event{Version: "0", ID: "id-1", DetailType: `t,"detail":0`, Source: "s<&>", Account: "1", Time: "2026-11-26T10:00:00Z",
		Region: "us-east-1", Resources: []string{}, Detail: detail, ReplayName: "r1"}
	raw, err := marshalEvent(ev)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":"0","id":"id-1","detail-type":"t,\"detail\":0","source":"s<&>","account":"1","time":"2026-11-26T10:00:00Z",` +
		`"region":"us-east-1","resources":[],"detail":{"a":"x,\"detail\":0 <&>","n":[1,2]},"replay-name":"r1"}`
	if string(raw) != want {
		t.Fatalf("got  %s\nwant %s", raw, want)
	}
	var back Event
	if err := json.Unmarshal(raw, &back); err != nil || !reflect.DeepEqual(back, ev) {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	if _, ok := compactObject(`[1]`); ok {
		t.Errorf("an array passed as a detail object")
	}
	if _, ok := compactObject(`{"a":`); ok {
		t.Errorf("broken JSON passed as a detail object")
	}
}
