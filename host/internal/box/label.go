package box

import (
	"slices"
	"strconv"

	"github.com/hermes-box/hermes-box/host/internal/backup"
)

// unsafeRunes are the characters of label SanitizeLabel would drop or
// rewrite, each quoted once, in order.
func unsafeRunes(label string) []string {
	var out []string
	for _, r := range label {
		q := strconv.QuoteRune(r)
		if backup.SanitizeLabel(string(r)) != string(r) && !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	return out
}
