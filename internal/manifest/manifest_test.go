package manifest

import (
	"reflect"
	"testing"
)

func files(sizes ...int64) []File {
	out := make([]File, len(sizes))
	for i, s := range sizes {
		out[i] = File{Bucket: "b", Key: string(rune('a' + i)), ResourceType: "Patient", Bytes: s}
	}
	return out
}

func sizes(batches []Batch) [][]int64 {
	var out [][]int64
	for _, b := range batches {
		var s []int64
		var sum int64
		for _, f := range b.Files {
			s = append(s, f.Bytes)
			sum += f.Bytes
		}
		if sum != b.Bytes {
			panic("batch bytes do not add up")
		}
		out = append(out, s)
	}
	return out
}

func TestPlan(t *testing.T) {
	cases := []struct {
		name string
		in   []File
		l    Limits
		want [][]int64
	}{
		{"none", nil, Limits{MaxFiles: 3, MaxBytes: 10}, nil},
		{"by files", files(1, 1, 1, 1, 1), Limits{MaxFiles: 2}, [][]int64{{1, 1}, {1, 1}, {1}}},
		{"by bytes", files(4, 4, 4, 9, 1), Limits{MaxFiles: 10, MaxBytes: 10}, [][]int64{{4, 4}, {4}, {9, 1}}},
		{"oversized file in ranges", files(3, 45, 3), Limits{MaxBytes: 10}, [][]int64{{3}, {10}, {10}, {10}, {10}, {5, 3}}},
		{"oversized file of unknown size", files(3, 0, 3), Limits{MaxBytes: 5}, [][]int64{{3, 0}, {3}}},
		{"exactly the limit", files(5, 5, 5), Limits{MaxBytes: 10}, [][]int64{{5, 5}, {5}}},
		{"no limits", files(1, 2, 3), Limits{}, [][]int64{{1, 2, 3}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Plan(c.in, c.l)
			if got == nil {
				t.Fatal("Plan returned nil")
			}
			if s := sizes(got); !reflect.DeepEqual(s, c.want) {
				t.Fatalf("Plan = %v, want %v", s, c.want)
			}
			want := 0
			for _, b := range c.want {
				want += len(b)
			}
			if FileCount(got) != want {
				t.Fatalf("FileCount = %d, want %d", FileCount(got), want)
			}
		})
	}
}

// TestPlanCutsALargeFileIntoRanges: a file over MaxBytes becomes ranges of
// MaxBytes that cover it without gap or overlap, the last one open-ended,
// each named apart.
func TestPlanCutsALargeFileIntoRanges(t *testing.T) {
	f := File{Bucket: "b", Key: "exports/j/Observation/Observation-1.ndjson", ResourceType: "Observation", Bytes: 25}
	got := Plan([]File{f}, Limits{MaxFiles: 10, MaxBytes: 10})
	want := [][2]int64{{0, 10}, {10, 20}, {20, 0}}
	if len(got) != len(want) {
		t.Fatalf("Plan = %+v, want %d batches of one range", got, len(want))
	}
	names := map[string]bool{}
	for i, b := range got {
		r := b.Files[0]
		if len(b.Files) != 1 || r.Start != want[i][0] || r.End != want[i][1] || r.Key != f.Key || r.ResourceType != f.ResourceType {
			t.Fatalf("batch %d = %+v, want the range [%d, %d) of %s", i, b.Files, want[i][0], want[i][1], f.Key)
		}
		if err := r.Check(); err != nil {
			t.Fatalf("range %d: %v", i, err)
		}
		names[r.Name()] = true
	}
	if len(names) != 3 || !names[f.Key] || !names[f.Key+"@10"] {
		t.Fatalf("range names %v, want the key and key@10, key@20", names)
	}
	for _, bad := range []File{{Key: "k", Start: -1}, {Key: "k", Start: 5, End: 5}, {Key: "k", End: -2}} {
		if bad.Check() == nil {
			t.Fatalf("Check(%+v) = nil, want an error", bad)
		}
	}
}

func TestPartKey(t *testing.T) {
	if got, want := PartKey("run-1", 0), "manifests/run-1/part-00000.json"; got != want {
		t.Fatalf("PartKey = %q, want %q", got, want)
	}
	if got, want := PartKey("r", 123456), "manifests/r/part-123456.json"; got != want {
		t.Fatalf("PartKey = %q, want %q", got, want)
	}
}

func TestSplit(t *testing.T) {
	five := Plan(files(1, 2, 3, 4, 5), Limits{MaxFiles: 1})
	cases := []struct {
		name  string
		in    []Batch
		max   int
		parts []int // batches per part
	}{
		{"no batches", nil, 2, []int{0}},
		{"empty batches", []Batch{}, 0, []int{0}},
		{"one part when unbounded", five, 0, []int{5}},
		{"negative is unbounded", five, -1, []int{5}},
		{"exact fit", five, 5, []int{5}},
		{"remainder", five, 2, []int{2, 2, 1}},
		{"one per part", five, 1, []int{1, 1, 1, 1, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Split(c.in, c.max)
			var n []int
			var flat []Batch
			for _, p := range got {
				if p == nil {
					t.Fatal("Split returned a nil part")
				}
				n = append(n, len(p))
				flat = append(flat, p...)
			}
			if !reflect.DeepEqual(n, c.parts) {
				t.Fatalf("batches per part = %v, want %v", n, c.parts)
			}
			if len(c.in) > 0 && !reflect.DeepEqual(flat, c.in) {
				t.Fatal("parts do not concatenate to the input in order")
			}
		})
	}
}

func TestPartFiles(t *testing.T) {
	parts := Split(Plan(files(1, 1, 1, 1, 1), Limits{MaxFiles: 2}), 2)
	if got, want := PartFiles(parts), []int{4, 1}; !reflect.DeepEqual(got, want) {
		t.Fatalf("PartFiles = %v, want %v", got, want)
	}
	if got := PartFiles(Split(nil, 3)); !reflect.DeepEqual(got, []int{0}) {
		t.Fatalf("PartFiles of no batches = %v, want [0]", got)
	}
}
