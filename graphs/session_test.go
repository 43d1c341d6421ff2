package graphs

import "testing"

func TestChunkPlan(t *testing.T) {
	s := &Session{opts: Options{Buckets: DefaultBuckets}}
	cases := []struct {
		n    int
		plan [][2]int // {take, T}
	}{
		{1, [][2]int{{1, 1}}},
		{5, [][2]int{{5, 8}}},
		{8, [][2]int{{8, 8}}},
		{18, [][2]int{{16, 16}, {2, 8}}},
		{115, [][2]int{{115, 128}}},
		{90, [][2]int{{64, 64}, {26, 32}}},
		{1200, [][2]int{{512, 512}, {512, 512}, {128, 128}, {48, 64}}},
		{1230, [][2]int{{512, 512}, {512, 512}, {206, 256}}},
	}
	for _, c := range cases {
		var got [][2]int
		for rest := c.n; rest > 0; {
			take, T := s.chunk(rest)
			if take < 1 || take > T {
				t.Fatalf("n=%d: chunk (%d, %d)", c.n, take, T)
			}
			got = append(got, [2]int{take, T})
			rest -= take
		}
		if len(got) != len(c.plan) {
			t.Errorf("n=%d: plan %v, want %v", c.n, got, c.plan)
			continue
		}
		for i := range got {
			if got[i] != c.plan[i] {
				t.Errorf("n=%d: plan %v, want %v", c.n, got, c.plan)
				break
			}
		}
	}
}
