package fakehealthlake

import "hash/maphash"

// keyIndex finds a resource by its "Type/id" key: an open-addressing hash
// table of res indices (4 bytes a slot, where a map[string]int32 would keep
// a 24-byte slot with a second copy of the string header). The keys
// themselves are those of the res entries. A hard-deleted resource keeps
// its slot (its entry is gone) until the table grows.
type keyIndex struct {
	seed  maphash.Seed
	slots []int32 // res index + 1; 0 is empty
	live  int     // resources findable
	used  int     // slots taken, including those of gone entries
}

func newKeyIndex() keyIndex { return keyIndex{seed: maphash.MakeSeed()} }

// find returns the res index of the resource with key, if not hard deleted.
func (x *keyIndex) find(res []resEntry, key string) (int32, bool) {
	if len(x.slots) == 0 {
		return 0, false
	}
	mask := uint64(len(x.slots) - 1)
	for i := maphash.String(x.seed, key) & mask; ; i = (i + 1) & mask {
		s := x.slots[i]
		if s == 0 {
			return 0, false
		}
		if r := &res[s-1]; !r.gone && r.key == key {
			return s - 1, true
		}
	}
}

// insert adds res[ri], whose key is not findable.
func (x *keyIndex) insert(res []resEntry, ri int32) {
	if (x.used+1)*4 > len(x.slots)*3 {
		x.grow(res)
	}
	x.place(res[ri].key, ri)
	x.used++
	x.live++
}

// place puts ri in the first free slot of key's probe sequence.
func (x *keyIndex) place(key string, ri int32) {
	mask := uint64(len(x.slots) - 1)
	i := maphash.String(x.seed, key) & mask
	for x.slots[i] != 0 {
		i = (i + 1) & mask
	}
	x.slots[i] = ri + 1
}

// forget notes that a resource was hard deleted (its entry is gone).
func (x *keyIndex) forget() { x.live-- }

// grow rebuilds the table for the live resources, with room to spare.
func (x *keyIndex) grow(res []resEntry) {
	size := 8
	for size*3 < (x.live+1)*4*2 {
		size *= 2
	}
	old := x.slots
	x.slots = make([]int32, size)
	x.used = 0
	for _, s := range old {
		if s != 0 && !res[s-1].gone {
			x.place(res[s-1].key, s-1)
			x.used++
		}
	}
}
