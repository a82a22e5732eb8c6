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
		{"oversized file alone", files(3, 50, 3), Limits{MaxBytes: 10}, [][]int64{{3}, {50}, {3}}},
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
			if FileCount(got) != len(c.in) {
				t.Fatalf("FileCount = %d, want %d", FileCount(got), len(c.in))
			}
		})
	}
}
