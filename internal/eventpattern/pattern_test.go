package eventpattern

import (
	"errors"
	"strings"
	"testing"
)

// The tables below are built from the examples of EventBridge's user guide
// pages on event patterns ("Event pattern syntax", "Comparison operators for
// use in event patterns" / "Content filtering", "Arrays in event patterns",
// "Matching events on null values and empty strings"), each example with
// events it must and must not match.

// ec2Event is the EC2 state-change event of the user guide's examples.
const ec2Event = `{
  "version": "0", "id": "7bf73129-1428-4cd3-a780-95db273d1602",
  "detail-type": "EC2 Instance State-change Notification", "source": "aws.ec2",
  "account": "123456789012", "time": "2015-11-11T21:29:54Z", "region": "us-east-1",
  "resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-abcd1111"],
  "detail": {"instance-id": "i-abcd1111", "state": "pending"}
}`

type matchCase struct {
	name    string
	pattern string
	event   string
	want    bool
}

func runMatches(t *testing.T, cases []matchCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := Parse(c.pattern)
			if err != nil {
				t.Fatalf("Parse(%s): %v", c.pattern, err)
			}
			got, err := p.Matches([]byte(c.event))
			if err != nil {
				t.Fatalf("Matches: %v", err)
			}
			if got != c.want {
				t.Errorf("pattern %s on event %s = %v, want %v", c.pattern, c.event, got, c.want)
			}
		})
	}
}

func TestPatternSyntaxAndExactValues(t *testing.T) {
	runMatches(t, []matchCase{
		{"source detail-type and nested state", `{"source":["aws.ec2"],"detail-type":["EC2 Instance State-change Notification"],"detail":{"state":["pending"]}}`, ec2Event, true},
		{"nested value differs", `{"source":["aws.ec2"],"detail":{"state":["terminated"]}}`, ec2Event, false},
		{"one of several values", `{"source":["aws.ec2","aws.fargate"]}`, ec2Event, true},
		{"none of several values", `{"source":["aws.s3","aws.fargate"]}`, ec2Event, false},
		{"field missing from event", `{"detail":{"missing":["x"]}}`, ec2Event, false},
		{"same nesting required", `{"state":["pending"]}`, ec2Event, false},
		{"case sensitive", `{"source":["AWS.EC2"]}`, ec2Event, false},
		{"fields not in the pattern are ignored", `{"account":["123456789012"]}`, ec2Event, true},
		{"And: Location and Day", `{"Location":["New York"],"Day":["Monday"]}`, `{"Location":"New York","Day":"Monday"}`, true},
		{"And: one fails", `{"Location":["New York"],"Day":["Monday"]}`, `{"Location":"New York","Day":"Sunday"}`, false},
		{"Equals Alice", `{"Name":["Alice"]}`, `{"Name":"Alice"}`, true},
		{"Equals is not prefix", `{"Name":["Alice"]}`, `{"Name":"Alice B"}`, false},
		{"number exact", `{"detail":{"n":[5]}}`, `{"detail":{"n":5.0}}`, true},
		{"number exact differs", `{"detail":{"n":[5]}}`, `{"detail":{"n":6}}`, false},
		{"number does not match string", `{"detail":{"n":[5]}}`, `{"detail":{"n":"5"}}`, false},
		{"string does not match number", `{"detail":{"n":["5"]}}`, `{"detail":{"n":5}}`, false},
		{"boolean", `{"detail":{"ok":[true]}}`, `{"detail":{"ok":true}}`, true},
		{"boolean differs", `{"detail":{"ok":[true]}}`, `{"detail":{"ok":false}}`, false},
		{"duplicate key: the last is used", `{"detail":{"location":[{"prefix":"us-"}],"location":[{"anything-but":"us-east"}]}}`, `{"detail":{"location":"eu-west"}}`, true},
		{"duplicate key: the first is ignored", `{"detail":{"location":[{"prefix":"us-"}],"location":[{"anything-but":"us-east"}]}}`, `{"detail":{"location":"us-east"}}`, false},
	})
}

func TestNullAndEmptyString(t *testing.T) {
	ev := `{"version":"0","id":"3e3c153a-8339-4e30-8c35-687ebef853fe","detail-type":"EC2 Instance Launch Successful","source":"aws.autoscaling","account":"123456789012","time":"2015-11-11T21:31:47Z","region":"us-east-1","resources":[],"detail":{"eventVersion":"","responseElements":null}}`
	runMatches(t, []matchCase{
		{"empty string", `{"detail":{"eventVersion":[""]}}`, ev, true},
		{"null", `{"detail":{"responseElements":[null]}}`, ev, true},
		{"empty string does not match null", `{"detail":{"responseElements":[""]}}`, ev, false},
		{"null does not match empty string", `{"detail":{"eventVersion":[null]}}`, ev, false},
		{"null does not match a missing field", `{"detail":{"other":[null]}}`, ev, false},
		{"LastName is empty", `{"LastName":[""]}`, `{"LastName":""}`, true},
		{"LastName is not empty", `{"LastName":[""]}`, `{"LastName":"Doe"}`, false},
	})
}

func TestArrays(t *testing.T) {
	pattern := `{"resources":["arn:aws:ec2:us-east-1:123456789012:instance/i-b188560f","arn:aws:ec2:us-east-1:111122223333:instance/i-b188560f","arn:aws:ec2:us-east-1:444455556666:instance/i-b188560f"]}`
	runMatches(t, []matchCase{
		{"intersection: first pattern value, first event value", pattern, `{"resources":["arn:aws:ec2:us-east-1:123456789012:instance/i-b188560f","arn:aws:ec2:us-east-1:111111111111:instance/i-b188560f"]}`, true},
		{"intersection: last event value", pattern, `{"resources":["arn:aws:ec2:us-east-1:000000000000:instance/i-x","arn:aws:ec2:us-east-1:444455556666:instance/i-b188560f"]}`, true},
		{"no intersection", pattern, `{"resources":["arn:aws:ec2:us-east-1:000000000000:instance/i-x"]}`, false},
		{"empty event array", pattern, `{"resources":[]}`, false},
		{"event array of objects: one element matches", `{"detail":{"items":{"state":["on"]}}}`, `{"detail":{"items":[{"state":"off"},{"state":"on"}]}}`, true},
		{"event array of objects: fields of one element together", `{"detail":{"items":{"a":[1],"b":[4]}}}`, `{"detail":{"items":[{"a":1,"b":2},{"a":3,"b":4}]}}`, false},
		{"event array of objects: both fields in one element", `{"detail":{"items":{"a":[3],"b":[4]}}}`, `{"detail":{"items":[{"a":1,"b":2},{"a":3,"b":4}]}}`, true},
		{"nested arrays flattened", `{"detail":{"v":["x"]}}`, `{"detail":{"v":[["a"],["x"]]}}`, true},
		{"operator on any element", `{"detail":{"v":[{"prefix":"ab"}]}}`, `{"detail":{"v":["zz","abc"]}}`, true},
	})
}

func TestPrefixAndSuffix(t *testing.T) {
	runMatches(t, []matchCase{
		{"prefix time", `{"time":[{"prefix":"2017-10-02"}]}`, `{"time":"2017-10-02T18:43:48Z"}`, true},
		{"prefix time other day", `{"time":[{"prefix":"2017-10-02"}]}`, `{"time":"2017-10-03T18:43:48Z"}`, false},
		{"begins with us-", `{"Region":[{"prefix":"us-"}]}`, `{"Region":"us-east-1"}`, true},
		{"begins with: not", `{"Region":[{"prefix":"us-"}]}`, `{"Region":"eu-west-1"}`, false},
		{"prefix is case sensitive", `{"Region":[{"prefix":"us-"}]}`, `{"Region":"US-EAST-1"}`, false},
		{"prefix ignore case EventB", `{"detail":{"service":[{"prefix":{"equals-ignore-case":"EventB"}}]}}`, `{"detail":{"service":"eventbridge"}}`, true},
		{"prefix ignore case EVENTB", `{"detail":{"service":[{"prefix":{"equals-ignore-case":"EventB"}}]}}`, `{"detail":{"service":"EVENTBRIDGE"}}`, true},
		{"prefix ignore case: other", `{"detail":{"service":[{"prefix":{"equals-ignore-case":"EventB"}}]}}`, `{"detail":{"service":"sns"}}`, false},
		{"prefix on a number does not match", `{"n":[{"prefix":"1"}]}`, `{"n":12}`, false},
		{"suffix .png", `{"FileName":[{"suffix":".png"}]}`, `{"FileName":"image.png"}`, true},
		{"suffix .png: other", `{"FileName":[{"suffix":".png"}]}`, `{"FileName":"image.jpg"}`, false},
		{"suffix is case sensitive", `{"FileName":[{"suffix":".png"}]}`, `{"FileName":"image.PNG"}`, false},
		{"suffix ignore case", `{"detail":{"FileName":[{"suffix":{"equals-ignore-case":".png"}}]}}`, `{"detail":{"FileName":"IMAGE.PNG"}}`, true},
		{"suffix ignore case tbridge", `{"service":[{"suffix":{"equals-ignore-case":"tbridge"}}]}`, `{"service":"EvenTBRIDGE"}`, true},
		{"suffix ignore case: other", `{"detail":{"FileName":[{"suffix":{"equals-ignore-case":".png"}}]}}`, `{"detail":{"FileName":"a.gif"}}`, false},
	})
}

func TestEqualsIgnoreCaseAndWildcard(t *testing.T) {
	runMatches(t, []matchCase{
		{"equals-ignore-case alice", `{"Name":[{"equals-ignore-case":"alice"}]}`, `{"Name":"Alice"}`, true},
		{"equals-ignore-case ALICE", `{"Name":[{"equals-ignore-case":"alice"}]}`, `{"Name":"ALICE"}`, true},
		{"equals-ignore-case not a prefix", `{"Name":[{"equals-ignore-case":"alice"}]}`, `{"Name":"Alicea"}`, false},
		{"wildcard dir/*.png", `{"FileName":[{"wildcard":"dir/*.png"}]}`, `{"FileName":"dir/image.png"}`, true},
		{"wildcard star matches empty", `{"FileName":[{"wildcard":"dir/*.png"}]}`, `{"FileName":"dir/.png"}`, true},
		{"wildcard star crosses slashes", `{"FileName":[{"wildcard":"dir/*.png"}]}`, `{"FileName":"dir/a/b.png"}`, true},
		{"wildcard: other dir", `{"FileName":[{"wildcard":"dir/*.png"}]}`, `{"FileName":"other/image.png"}`, false},
		{"wildcard: other extension", `{"FileName":[{"wildcard":"dir/*.png"}]}`, `{"FileName":"dir/image.jpg"}`, false},
		{"wildcard two stars", `{"EventBusArn":[{"wildcard":"arn:aws:events:us-east-1:*:event-bus/*"}]}`, `{"EventBusArn":"arn:aws:events:us-east-1:123456789012:event-bus/default"}`, true},
		{"wildcard two stars: other region", `{"EventBusArn":[{"wildcard":"arn:aws:events:us-east-1:*:event-bus/*"}]}`, `{"EventBusArn":"arn:aws:events:eu-west-1:123456789012:event-bus/default"}`, false},
		{"wildcard escaped star is literal", `{"k":[{"wildcard":"a\\*b"}]}`, `{"k":"a*b"}`, true},
		{"wildcard escaped star is not a wildcard", `{"k":[{"wildcard":"a\\*b"}]}`, `{"k":"axb"}`, false},
		{"wildcard escaped backslash", `{"k":[{"wildcard":"a\\\\*"}]}`, `{"k":"a\\xyz"}`, true},
		{"wildcard without star is exact", `{"k":[{"wildcard":"abc"}]}`, `{"k":"abcd"}`, false},
		{"wildcard overlapping parts", `{"k":[{"wildcard":"*ab*ab"}]}`, `{"k":"abab"}`, true},
		{"wildcard overlapping parts need room", `{"k":[{"wildcard":"ab*ab"}]}`, `{"k":"aba"}`, false},
	})
}

func TestAnythingBut(t *testing.T) {
	runMatches(t, []matchCase{
		{"string: other", `{"detail":{"state":[{"anything-but":"initializing"}]}}`, `{"detail":{"state":"running"}}`, true},
		{"string: same", `{"detail":{"state":[{"anything-but":"initializing"}]}}`, `{"detail":{"state":"initializing"}}`, false},
		{"string: field missing", `{"detail":{"state":[{"anything-but":"initializing"}]}}`, `{"detail":{}}`, false},
		{"number: other", `{"detail":{"x-limit":[{"anything-but":123}]}}`, `{"detail":{"x-limit":124}}`, true},
		{"number: same", `{"detail":{"x-limit":[{"anything-but":123}]}}`, `{"detail":{"x-limit":123}}`, false},
		{"string list: other", `{"detail":{"state":[{"anything-but":["stopped","overloaded"]}]}}`, `{"detail":{"state":"running"}}`, true},
		{"string list: listed", `{"detail":{"state":[{"anything-but":["stopped","overloaded"]}]}}`, `{"detail":{"state":"overloaded"}}`, false},
		{"number list: other", `{"detail":{"x-limit":[{"anything-but":[100,200,300]}]}}`, `{"detail":{"x-limit":150}}`, true},
		{"number list: listed", `{"detail":{"x-limit":[{"anything-but":[100,200,300]}]}}`, `{"detail":{"x-limit":200}}`, false},
		{"prefix: other", `{"detail":{"state":[{"anything-but":{"prefix":"init"}}]}}`, `{"detail":{"state":"running"}}`, true},
		{"prefix: has it", `{"detail":{"state":[{"anything-but":{"prefix":"init"}}]}}`, `{"detail":{"state":"initializing"}}`, false},
		{"Region not in the US", `{"Region":[{"anything-but":{"prefix":"us-"}}]}`, `{"Region":"eu-west-1"}`, true},
		{"Region in the US", `{"Region":[{"anything-but":{"prefix":"us-"}}]}`, `{"Region":"us-east-2"}`, false},
		{"suffix: other", `{"FileName":[{"anything-but":{"suffix":".png"}}]}`, `{"FileName":"a.txt"}`, true},
		{"suffix: has it", `{"FileName":[{"anything-but":{"suffix":".png"}}]}`, `{"FileName":"a.png"}`, false},
		{"ignore case: other", `{"state":[{"anything-but":{"equals-ignore-case":"initializing"}}]}`, `{"state":"running"}`, true},
		{"ignore case: INITIALIZING", `{"state":[{"anything-but":{"equals-ignore-case":"initializing"}}]}`, `{"state":"INITIALIZING"}`, false},
		{"ignore case list: other", `{"state":[{"anything-but":{"equals-ignore-case":["initializing","stopped"]}}]}`, `{"state":"running"}`, true},
		{"ignore case list: listed", `{"state":[{"anything-but":{"equals-ignore-case":["initializing","stopped"]}}]}`, `{"state":"Stopped"}`, false},
		{"wildcard: no /lib/", `{"FilePath":[{"anything-but":{"wildcard":"*/lib/*"}}]}`, `{"FilePath":"/usr/bin/x"}`, true},
		{"wildcard: has /lib/", `{"FilePath":[{"anything-but":{"wildcard":"*/lib/*"}}]}`, `{"FilePath":"/usr/lib/x"}`, false},
		{"wildcard list: none", `{"FilePath":[{"anything-but":{"wildcard":["*/lib/*","*/bin/*"]}}]}`, `{"FilePath":"/usr/share/x"}`, true},
		{"wildcard list: second", `{"FilePath":[{"anything-but":{"wildcard":["*/lib/*","*/bin/*"]}}]}`, `{"FilePath":"/usr/bin/x"}`, false},
		{"array event: one element not excluded", `{"state":[{"anything-but":"a"}]}`, `{"state":["a","b"]}`, true},
		{"array event: all excluded", `{"state":[{"anything-but":["a","b"]}]}`, `{"state":["a","b"]}`, false},
	})
}

func TestNumeric(t *testing.T) {
	all := `{"detail":{"c-count":[{"numeric":[">",0,"<=",5]}],"d-count":[{"numeric":["<",10]}],"x-limit":[{"numeric":["=",3.018e2]}]}}`
	runMatches(t, []matchCase{
		{"all three hold", all, `{"detail":{"c-count":5,"d-count":9.99,"x-limit":301.8}}`, true},
		{"c-count at the open lower bound", all, `{"detail":{"c-count":0,"d-count":1,"x-limit":301.8}}`, false},
		{"c-count above the closed upper bound", all, `{"detail":{"c-count":5.000001,"d-count":1,"x-limit":301.8}}`, false},
		{"d-count at the open upper bound", all, `{"detail":{"c-count":1,"d-count":10,"x-limit":301.8}}`, false},
		{"x-limit other", all, `{"detail":{"c-count":1,"d-count":1,"x-limit":301.9}}`, false},
		{"numeric does not match a string", `{"n":[{"numeric":[">",0]}]}`, `{"n":"5"}`, false},
		{"greater or equal", `{"n":[{"numeric":[">=",5]}]}`, `{"n":5}`, true},
		{"negative", `{"n":[{"numeric":["<",0]}]}`, `{"n":-1.5}`, true},
		{"decimals beyond six are ignored", `{"n":[{"numeric":["=",1.0000001]}]}`, `{"n":1}`, true},
	})
}

func TestCIDR(t *testing.T) {
	p := `{"detail":{"sourceIPAddress":[{"cidr":"10.0.0.0/24"}]}}`
	runMatches(t, []matchCase{
		{"in range low", p, `{"detail":{"sourceIPAddress":"10.0.0.0"}}`, true},
		{"in range high", p, `{"detail":{"sourceIPAddress":"10.0.0.255"}}`, true},
		{"out of range", p, `{"detail":{"sourceIPAddress":"10.0.1.0"}}`, false},
		{"not an address", p, `{"detail":{"sourceIPAddress":"example.com"}}`, false},
		{"IPv6", `{"ip":[{"cidr":"2001:db8::/32"}]}`, `{"ip":"2001:db8::1"}`, true},
		{"IPv6 out of range", `{"ip":[{"cidr":"2001:db8::/32"}]}`, `{"ip":"2001:db9::1"}`, false},
	})
}

func TestExists(t *testing.T) {
	noCount := `{"detail-type":["EC2 Instance State-change Notification"],"resources":["arn:aws:ec2:us-east-1:123456789012:instance/i-02ebd4584a2ebd341"],"detail":{"state":["initializing","running"]}}`
	objCount := `{"detail-type":["EC2 Instance State-change Notification"],"resources":["arn:aws:ec2:us-east-1:123456789012:instance/i-02ebd4584a2ebd341"],"detail":{"state":["initializing","running"],"c-count":{"c1":100}}}`
	runMatches(t, []matchCase{
		{"exists true: state present", `{"detail":{"state":[{"exists":true}]}}`, ec2Event, true},
		{"exists true: state absent", `{"detail":{"state":[{"exists":true}]}}`, `{"detail":{"c-count":{"c1":100}}}`, false},
		{"exists false: c-count absent", `{"detail":{"c-count":[{"exists":false}]}}`, noCount, true},
		{"exists false: c-count is not a leaf", `{"detail":{"c-count":[{"exists":false}]}}`, objCount, true},
		{"exists false: c-count is a leaf", `{"detail":{"c-count":[{"exists":false}]}}`, `{"detail":{"c-count":3}}`, false},
		{"exists true: null is a value", `{"detail":{"v":[{"exists":true}]}}`, `{"detail":{"v":null}}`, true},
		{"exists false: whole parent missing", `{"detail":{"v":[{"exists":false}]}}`, `{"source":"x"}`, true},
		{"exists true: whole parent missing", `{"detail":{"v":[{"exists":true}]}}`, `{"source":"x"}`, false},
		{"exists false: empty array", `{"detail":{"v":[{"exists":false}]}}`, `{"detail":{"v":[]}}`, true},
	})
}

func TestComplexAndOr(t *testing.T) {
	complexP := `{"time":[{"prefix":"2017-10-02"}],"detail":{"state":[{"anything-but":"initializing"}],"c-count":[{"numeric":[">",0,"<=",5]}],"d-count":[{"numeric":["<",10]}],"x-limit":[{"anything-but":[100,200,300]}]}}`
	orNested := `{"detail":{"$or":[{"c-count":[{"numeric":[">",0,"<=",5]}]},{"d-count":[{"numeric":["<",10]}]},{"x-limit":[{"numeric":["=",3.018e2]}]}]}}`
	orTop := `{"source":["aws.ec2"],"$or":[{"detail-type":["EC2 Instance State-change Notification"]},{"detail":{"state":["terminated"]}}]}`
	orMixed := `{"source":["aws.ec2"],"detail-type":["EC2 Instance State-change Notification"],"$or":[{"detail":{"c-count":[{"numeric":[">",0,"<=",5]}]}},{"detail":{"d-count":[{"numeric":["<",10]}]}}]}`
	runMatches(t, []matchCase{
		{"complex: all hold", complexP, `{"time":"2017-10-02T18:43:48Z","detail":{"state":"running","c-count":3,"d-count":4,"x-limit":150}}`, true},
		{"complex: x-limit excluded", complexP, `{"time":"2017-10-02T18:43:48Z","detail":{"state":"running","c-count":3,"d-count":4,"x-limit":200}}`, false},
		{"complex: state excluded", complexP, `{"time":"2017-10-02T18:43:48Z","detail":{"state":"initializing","c-count":3,"d-count":4,"x-limit":150}}`, false},
		{"$or nested: first", orNested, `{"detail":{"c-count":3}}`, true},
		{"$or nested: second", orNested, `{"detail":{"d-count":9}}`, true},
		{"$or nested: third", orNested, `{"detail":{"x-limit":301.8}}`, true},
		{"$or nested: none", orNested, `{"detail":{"c-count":9,"d-count":11,"x-limit":1}}`, false},
		{"$or top: detail-type", orTop, ec2Event, true},
		{"$or top: source must also hold", orTop, `{"source":"aws.s3","detail-type":"EC2 Instance State-change Notification"}`, false},
		{"$or top: second alternative", orTop, `{"source":"aws.ec2","detail-type":"other","detail":{"state":"terminated"}}`, true},
		{"$or top: neither", orTop, `{"source":"aws.ec2","detail-type":"other","detail":{"state":"running"}}`, false},
		{"$or with fields", orMixed, `{"source":"aws.ec2","detail-type":"EC2 Instance State-change Notification","detail":{"d-count":1}}`, true},
		{"$or with fields: none", orMixed, `{"source":"aws.ec2","detail-type":"EC2 Instance State-change Notification","detail":{"d-count":11}}`, false},
		{"$or with exists false", `{"$or":[{"a":[{"exists":false}]},{"a":["x"]}]}`, `{"b":1}`, true},
	})
}

func TestInvalidPatterns(t *testing.T) {
	cases := []struct{ name, pattern, reason string }{
		{"not JSON", `{"source":`, "not valid JSON"},
		{"trailing content", `{"source":["a"]} x`, "not valid JSON"},
		{"not an object", `["aws.ec2"]`, "Filter is not an object"},
		{"empty object", `{}`, "Empty objects are not allowed"},
		{"empty nested object", `{"detail":{}}`, "Empty objects are not allowed"},
		{"scalar value", `{"source":"aws.ec2"}`, `"source" must be an object or an array`},
		{"empty array", `{"source":[]}`, "Empty arrays are not allowed"},
		{"array in array", `{"source":[["a"]]}`, "Match value must be String, number, true, false, or null"},
		{"unknown operator", `{"source":[{"contains":"a"}]}`, "Unrecognized match type contains"},
		{"two operators in one object", `{"source":[{"prefix":"a","suffix":"b"}]}`, "Only one key allowed"},
		{"empty operator object", `{"source":[{}]}`, "Empty objects are not allowed"},
		{"prefix not a string", `{"source":[{"prefix":1}]}`, "prefix match pattern must be a string"},
		{"prefix bad object", `{"source":[{"prefix":{"wildcard":"a"}}]}`, "prefix match pattern must be a string or"},
		{"suffix not a string", `{"source":[{"suffix":["a"]}]}`, "suffix match pattern must be a string"},
		{"equals-ignore-case not a string", `{"source":[{"equals-ignore-case":["a"]}]}`, "equals-ignore-case match pattern must be a string"},
		{"exists not boolean", `{"source":[{"exists":"true"}]}`, "exists match pattern must be either true or false"},
		{"numeric not an array", `{"n":[{"numeric":">"}]}`, "Value of numeric must be an array"},
		{"numeric odd terms", `{"n":[{"numeric":[">",0,"<"]}]}`, "one or two pairs"},
		{"numeric too many terms", `{"n":[{"numeric":[">",0,"<",5,"<",6]}]}`, "one or two pairs"},
		{"numeric bad operator", `{"n":[{"numeric":["!=",0]}]}`, "Unrecognized numeric range operator !="},
		{"numeric value a string", `{"n":[{"numeric":[">","0"]}]}`, "Value of > must be numeric"},
		{"numeric out of range", `{"n":[{"numeric":[">",6e9]}]}`, "out of range"},
		{"numeric two lower bounds", `{"n":[{"numeric":[">",0,">=",1]}]}`, "two lower bounds"},
		{"numeric = not alone", `{"n":[{"numeric":["=",1,"<",5]}]}`, "= must be used alone"},
		{"numeric empty range", `{"n":[{"numeric":[">",5,"<",1]}]}`, "Bad numeric range"},
		{"numeric empty open range", `{"n":[{"numeric":[">",5,"<",5]}]}`, "Bad numeric range"},
		{"exact number out of range", `{"n":[1e10]}`, "out of range"},
		{"anything-but mixed list", `{"s":[{"anything-but":["a",1]}]}`, "mixed types are not supported"},
		{"anything-but null in list", `{"s":[{"anything-but":["a",null]}]}`, "only strings or only numbers"},
		{"anything-but empty list", `{"s":[{"anything-but":[]}]}`, "Empty arrays are not allowed"},
		{"anything-but prefix list with a number", `{"s":[{"anything-but":{"prefix":["a",1]}}]}`, "only strings are allowed"},
		{"anything-but empty prefix in a list", `{"s":[{"anything-but":{"prefix":["a",""]}}]}`, "Null prefix not allowed"},
		{"anything-but empty prefix", `{"s":[{"anything-but":{"prefix":""}}]}`, "Null prefix not allowed"},
		{"anything-but unknown", `{"s":[{"anything-but":{"numeric":[">",1]}}]}`, "Unsupported anything-but pattern: numeric"},
		{"anything-but two keys", `{"s":[{"anything-but":{"prefix":"a","suffix":"b"}}]}`, "exactly one of"},
		{"anything-but boolean", `{"s":[{"anything-but":true}]}`, "Value of anything-but must be"},
		{"anything-but wildcard consecutive", `{"s":[{"anything-but":{"wildcard":"a**"}}]}`, "Consecutive wildcard characters at pos 2"},
		{"wildcard consecutive stars", `{"s":[{"wildcard":"a**b"}]}`, "Consecutive wildcard characters at pos 2"},
		{"wildcard bad escape", `{"s":[{"wildcard":"a\\b"}]}`, "Invalid escape character at pos 1"},
		{"wildcard not a string", `{"s":[{"wildcard":1}]}`, "wildcard match pattern must be a string"},
		{"cidr malformed", `{"ip":[{"cidr":"10.0.0.0/33"}]}`, "malformed CIDR"},
		{"cidr not an address", `{"ip":[{"cidr":"ten"}]}`, "nonstandard IP address"},
		{"$or not an array", `{"$or":{"a":["x"]}}`, "Value of $or must be an array"},
		{"$or one element", `{"$or":[{"a":["x"]}]}`, "$or must have at least 2 elements"},
		{"$or element not object", `{"$or":[{"a":["x"]},"b"]}`, "Elements of $or must be objects"},
		{"$or element empty", `{"$or":[{"a":["x"]},{}]}`, "Empty objects are not allowed"},
		{"$or inside a match list", `{"a":[{"$or":[{"b":["x"]},{"c":["y"]}]}]}`, "$or is not allowed inside a match list"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.pattern)
			var ie *InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("Parse(%s) = %v, want an InvalidError", c.pattern, err)
			}
			if !strings.HasPrefix(err.Error(), "Event pattern is not valid. Reason: ") || !strings.Contains(ie.Reason, c.reason) {
				t.Errorf("Parse(%s) = %q, want a reason containing %q", c.pattern, err.Error(), c.reason)
			}
		})
	}
}

func TestMatchesRefusesANonObjectEvent(t *testing.T) {
	p := MustParse(`{"source":["a"]}`)
	for _, ev := range []string{`[1]`, `"x"`, `{`} {
		if _, err := p.Matches([]byte(ev)); err == nil {
			t.Errorf("Matches(%s): no error", ev)
		}
	}
	if p.String() != `{"source":["a"]}` {
		t.Errorf("String() = %s", p.String())
	}
}
