// Package backupset is the set of a machine's backups as the `backups`
// commands see it, v2 and incremental alike: the listing (own size, what
// each added, verification), retention (`backups prune`: which backups a
// policy keeps, the others unpublished and removed, then the chunk store
// collected), `backups repair` and `backups export`.
package backupset

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Policy says which backups prune keeps, as restic's `forget` does: the
// Last newest, and the newest of each of the Daily most recent days and
// of the Weekly most recent ISO weeks (Monday to Sunday) that have a
// backup. A backup kept by any rule is kept.
type Policy struct {
	Last   int `json:"keep_last"`
	Daily  int `json:"keep_daily"`
	Weekly int `json:"keep_weekly"`
}

// ErrEmptyPolicy is a policy that keeps nothing: prune refuses it, as
// restic refuses an empty policy, rather than remove every backup.
var ErrEmptyPolicy = errors.New("the retention policy keeps nothing: give --keep-last, --keep-daily or --keep-weekly at least 1")

// Check refuses a negative count (naming the flag) and an empty policy.
func (p Policy) Check() error {
	for _, f := range []struct {
		name string
		n    int
	}{{"--keep-last", p.Last}, {"--keep-daily", p.Daily}, {"--keep-weekly", p.Weekly}} {
		if f.n < 0 {
			return fmt.Errorf("%s must be at least 0, got %d", f.name, f.n)
		}
	}
	if p.Last == 0 && p.Daily == 0 && p.Weekly == 0 {
		return ErrEmptyPolicy
	}
	return nil
}

// String describes the policy.
func (p Policy) String() string {
	return fmt.Sprintf("keep the last %d, %d daily, %d weekly", p.Last, p.Daily, p.Weekly)
}

// rule is one --keep-* count: its name and the bucket a backup falls in.
type rule struct {
	name  string
	left  int
	last  string
	seen  bool
	which func(t time.Time, nr int) string
}

// Apply decides for backups created at times (in any order) which the
// policy keeps: the result holds, for each, the reasons it is kept
// ("last", "daily", "weekly", or "oldest daily" …), empty for a backup to
// remove. Days and weeks are those of loc. Walking from the newest, each
// rule keeps a backup whose bucket differs from the last one it kept
// while its count lasts; a rule with counts left when it reaches the
// oldest backup keeps that one too (restic does the same, so that a short
// history is kept whole). Equal times keep the later index as newer.
func (p Policy) Apply(times []time.Time, loc *time.Location) [][]string {
	order := make([]int, len(times))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if c := times[b].Compare(times[a]); c != 0 {
			return c
		}
		return b - a
	})
	rules := []*rule{
		{name: "last", left: p.Last, which: func(_ time.Time, nr int) string { return strconv.Itoa(nr) }},
		{name: "daily", left: p.Daily, which: func(t time.Time, _ int) string { return t.Format(time.DateOnly) }},
		{name: "weekly", left: p.Weekly, which: func(t time.Time, _ int) string {
			y, w := t.ISOWeek()
			return fmt.Sprintf("%d-W%02d", y, w)
		}},
	}
	out := make([][]string, len(times))
	for nr, i := range order {
		t := times[i].In(loc)
		for _, r := range rules {
			if r.left <= 0 {
				continue
			}
			b := r.which(t, nr)
			switch {
			case !r.seen || b != r.last:
				out[i] = append(out[i], r.name)
			case nr == len(order)-1:
				out[i] = append(out[i], "oldest "+r.name)
			default:
				continue
			}
			r.last, r.seen = b, true
			r.left--
		}
	}
	return out
}
