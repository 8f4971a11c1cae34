package backupset

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func at(s string) time.Time {
	t, err := time.Parse("2006-01-02 15:04", s)
	if err != nil {
		panic(err)
	}
	return t
}

// sundays are restic's documentation example: a backup every Sunday at
// 11:00 for 12 weeks, 2019-09-01 to 2019-11-17.
func sundays() []time.Time {
	var out []time.Time
	for i := range 12 {
		out = append(out, at("2019-09-01 11:00").AddDate(0, 0, 7*i))
	}
	return out
}

// everyDay is a backup at 03:00 every day for n days ending on Sunday
// 2019-11-17.
func everyDay(n int) []time.Time {
	var out []time.Time
	for i := n - 1; i >= 0; i-- {
		out = append(out, at("2019-11-17 03:00").AddDate(0, 0, -i))
	}
	return out
}

// TestPolicyKeepsWhatResticKeeps checks Apply against restic's `forget`
// semantics (its documentation's examples and rules) with fixed times:
// the kept backups (by their time) and the reasons.
func TestPolicyKeepsWhatResticKeeps(t *testing.T) {
	tests := []struct {
		name   string
		times  []time.Time
		policy Policy
		want   map[string]string // kept time -> reasons
	}{
		{"keep-last 3 of 5", []time.Time{at("2024-01-01 10:00"), at("2024-01-02 10:00"), at("2024-01-03 10:00"), at("2024-01-04 10:00"), at("2024-01-05 10:00")},
			Policy{Last: 3}, map[string]string{"2024-01-03 10:00": "last", "2024-01-04 10:00": "last", "2024-01-05 10:00": "last"}},
		{"keep-last in any order", []time.Time{at("2024-01-05 10:00"), at("2024-01-01 10:00"), at("2024-01-04 10:00")},
			Policy{Last: 2}, map[string]string{"2024-01-05 10:00": "last", "2024-01-04 10:00": "last"}},
		{"restic's Sundays, keep-daily 4", sundays(), Policy{Daily: 4},
			map[string]string{"2019-10-27 11:00": "daily", "2019-11-03 11:00": "daily", "2019-11-10 11:00": "daily", "2019-11-17 11:00": "daily"}},
		{"keep-daily keeps each day's newest", []time.Time{at("2024-03-01 09:00"), at("2024-03-02 08:00"), at("2024-03-02 23:59"), at("2024-03-03 00:00"), at("2024-03-03 12:00")},
			Policy{Daily: 2}, map[string]string{"2024-03-03 12:00": "daily", "2024-03-02 23:59": "daily"}},
		{"days with no backup do not count", []time.Time{at("2024-03-01 09:00"), at("2024-03-05 09:00"), at("2024-03-09 09:00"), at("2024-03-10 09:00")},
			Policy{Daily: 3}, map[string]string{"2024-03-10 09:00": "daily", "2024-03-09 09:00": "daily", "2024-03-05 09:00": "daily"}},
		// Weeks run Monday 00:00 to Sunday 23:59; 2020-12-31 and 2021-01-03
		// are both in ISO week 53 of 2020.
		{"keep-weekly on ISO weeks", []time.Time{at("2020-12-20 10:00"), at("2020-12-21 00:00"), at("2020-12-27 23:59"), at("2020-12-31 10:00"), at("2021-01-03 10:00"), at("2021-01-04 00:00")},
			Policy{Weekly: 3}, map[string]string{"2021-01-04 00:00": "weekly", "2021-01-03 10:00": "weekly", "2020-12-27 23:59": "weekly"}},
		// The documentation's example: daily backups, keep-daily 7 and
		// keep-weekly 5 keep the 7 days and 4 more Sundays.
		{"restic's daily 7, weekly 5", everyDay(60), Policy{Daily: 7, Weekly: 5}, map[string]string{
			"2019-11-17 03:00": "daily,weekly", "2019-11-16 03:00": "daily", "2019-11-15 03:00": "daily", "2019-11-14 03:00": "daily",
			"2019-11-13 03:00": "daily", "2019-11-12 03:00": "daily", "2019-11-11 03:00": "daily",
			"2019-11-10 03:00": "weekly", "2019-11-03 03:00": "weekly", "2019-10-27 03:00": "weekly", "2019-10-20 03:00": "weekly"}},
		{"rules combine", []time.Time{at("2024-05-01 10:00"), at("2024-05-06 10:00"), at("2024-05-13 09:00"), at("2024-05-13 10:00"), at("2024-05-14 10:00"), at("2024-05-14 11:00")},
			Policy{Last: 2, Daily: 2, Weekly: 2}, map[string]string{
				"2024-05-14 11:00": "last,daily,weekly", "2024-05-14 10:00": "last", "2024-05-13 10:00": "daily", "2024-05-06 10:00": "weekly"}},
		// Counts left at the oldest backup keep it, as restic keeps the
		// oldest snapshot ("oldest daily").
		{"the oldest is kept while counts are left", []time.Time{at("2024-06-01 08:00"), at("2024-06-01 09:00"), at("2024-06-02 09:00")},
			Policy{Daily: 5}, map[string]string{"2024-06-02 09:00": "daily", "2024-06-01 09:00": "daily", "2024-06-01 08:00": "oldest daily"}},
		{"no counts left at the oldest", []time.Time{at("2024-06-01 08:00"), at("2024-06-01 09:00"), at("2024-06-02 09:00")},
			Policy{Daily: 2}, map[string]string{"2024-06-02 09:00": "daily", "2024-06-01 09:00": "daily"}},
		{"one backup", []time.Time{at("2024-06-01 08:00")}, Policy{Weekly: 1}, map[string]string{"2024-06-01 08:00": "weekly"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]string{}
			for i, reasons := range tc.policy.Apply(tc.times, time.UTC) {
				if len(reasons) > 0 {
					got[tc.times[i].Format("2006-01-02 15:04")] = strings.Join(reasons, ",")
				}
			}
			if !mapsEqual(got, tc.want) {
				t.Errorf("kept %v\nwant %v", got, tc.want)
			}
		})
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestPolicyDaysAreLocal: a day is the location's, not UTC's.
func TestPolicyDaysAreLocal(t *testing.T) {
	ny := time.FixedZone("EST", -5*3600)
	// 2024-03-02 02:00 and 03:00 UTC are both 2024-03-01 in New York.
	times := []time.Time{at("2024-03-02 02:00"), at("2024-03-02 03:00")}
	if got := (Policy{Daily: 1}).Apply(times, time.UTC); len(got[0]) != 0 || !slices.Equal(got[1], []string{"daily"}) {
		t.Errorf("UTC: %v", got)
	}
	if got := (Policy{Daily: 2}).Apply(times, ny); !slices.Equal(got[0], []string{"oldest daily"}) {
		t.Errorf("New York: %v, want the older one kept only as the oldest", got)
	}
}

func TestPolicyCheck(t *testing.T) {
	for _, tc := range []struct {
		p    Policy
		want string
	}{
		{Policy{}, ErrEmptyPolicy.Error()},
		{Policy{Last: -1, Daily: 3}, "--keep-last must be at least 0, got -1"},
		{Policy{Weekly: -2}, "--keep-weekly must be at least 0, got -2"},
		{Policy{Daily: 1}, ""},
	} {
		err := tc.p.Check()
		if (err == nil) != (tc.want == "") || err != nil && err.Error() != tc.want {
			t.Errorf("%+v: %v, want %q", tc.p, err, tc.want)
		}
	}
	if !errors.Is(Policy{}.Check(), ErrEmptyPolicy) {
		t.Error("an empty policy is not ErrEmptyPolicy")
	}
}
