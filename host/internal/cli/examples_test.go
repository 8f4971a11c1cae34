package cli

import (
	"testing"

	"github.com/spf13/cobra"
)

// Every command has Examples, and every entry of the table names a
// command.
func TestEveryCommandHasExamples(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		key := commandKey(c)
		seen[key] = true
		if c.Example == "" {
			t.Errorf("%q has no Examples", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCommand())
	for key := range examples {
		if !seen[key] {
			t.Errorf("examples has %q, which is no command", key)
		}
	}
}
