package config

import (
	"strings"
	"testing"
)

// TestCheckMachineName: the names smolvm's validate_vm_name refuses are
// refused, with the reason; the restore candidates of the longest box name
// still fit smolvm's limit.
func TestCheckMachineName(t *testing.T) {
	tests := []struct {
		name string
		max  int
		want string // "" for accepted
	}{
		{"hermes-box", SmolvmNameMax, ""},
		{"Box_2-a", SmolvmNameMax, ""},
		{"7", SmolvmNameMax, ""},
		{strings.Repeat("a", SmolvmNameMax), SmolvmNameMax, ""},
		{strings.Repeat("a", SmolvmNameMax+1), SmolvmNameMax, "at most 128 characters, got 129"},
		{strings.Repeat("a", MachineNameMax+1), MachineNameMax, "at most 92 characters"},
		{"", SmolvmNameMax, "must not be empty"},
		{"box.v2", SmolvmNameMax, "may hold only letters, digits"},
		{"box--2", SmolvmNameMax, "two hyphens in a row"},
		{"box-", SmolvmNameMax, "must not end with a hyphen"},
		{"-box", SmolvmNameMax, "must start with a letter or digit"},
		{"_box", SmolvmNameMax, "must start with a letter or digit"},
		{"box two", SmolvmNameMax, "may hold only"},
		{"box/two", SmolvmNameMax, "may hold only"},
		{"bé", SmolvmNameMax, "may hold only"},
	}
	for _, tt := range tests {
		err := CheckMachineName(tt.name, tt.max)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("CheckMachineName(%q) = %v, want accepted", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("CheckMachineName(%q) = %v, want %q", tt.name, err, tt.want)
		}
	}
	longest := strings.Repeat("a", MachineNameMax) + "-restore-4194304-1764190000000000000"
	if err := CheckMachineName(longest, SmolvmNameMax); err != nil {
		t.Errorf("the longest restore candidate is refused: %v", err)
	}
}
