package ordered

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// TestPipeline: items finish in the order they were put, after their
// work, whichever worker ends first, with or without work; a failed
// finish stops the rest and Take reports it.
func TestPipeline(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		failAt  int // the item whose finish fails; -1 for none
		wantErr error
		want    []int
	}{
		{"all finish in order", -1, nil, []int{100, 101, 2, 103, 104, 5, 106, 107, 8, 109}},
		{"a failed finish stops the rest", 103, boom, []int{100, 101, 2, 103}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []int
			work := func(v *int) { // later items end first
				time.Sleep(time.Duration(10-*v) * time.Millisecond)
				*v += 100
			}
			finish := func(v *int) error {
				got = append(got, *v)
				if *v == tt.failAt {
					return boom
				}
				return nil
			}
			p := New(3, 4, work, finish)
			for i := range 10 {
				s, err := p.Take()
				if err != nil {
					break
				}
				s.V = i
				p.Put(s, i%3 != 2) // every third without work
			}
			if err := p.Close(); !errors.Is(err, tt.wantErr) {
				t.Fatalf("Close = %v, want %v", err, tt.wantErr)
			}
			if _, err := p.Take(); !errors.Is(err, tt.wantErr) {
				t.Fatalf("Take after Close = %v, want %v", err, tt.wantErr)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("finished %v, want %v", got, tt.want)
			}
			if err := p.Close(); err != nil {
				t.Fatalf("a second Close = %v", err)
			}
		})
	}
}
