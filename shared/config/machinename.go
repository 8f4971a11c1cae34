package config

import (
	"errors"
	"fmt"
	"strings"
)

// SmolvmNameMax is the longest machine name smolvm accepts
// (MAX_VM_NAME_LENGTH, src/data/mod.rs).
const SmolvmNameMax = 128

// candidateSuffixMax is the longest suffix hermes-box appends to the box's
// name for a restore candidate: "-restore-", a process id of up to 7
// digits, "-" and a time in Unix nanoseconds of 19 digits.
const candidateSuffixMax = len("-restore-") + 7 + 1 + 19

// MachineNameMax is the longest name the box itself may have, so that its
// restore candidates are still names smolvm accepts.
const MachineNameMax = SmolvmNameMax - candidateSuffixMax

// CheckMachineName applies smolvm's rule for machine names
// (validate_vm_name, src/data/mod.rs, the same at 1.0.4, 1.9.3 and 1.22.2):
// ASCII letters, digits, '-' and '_', starting with a letter or digit, no
// two hyphens in a row, no hyphen at the end, at most max characters
// (SmolvmNameMax, or less where hermes-box derives longer names from it).
// smolvm would refuse any other name when a machine is created, after
// hermes-box has already created others.
func CheckMachineName(name string, max int) error {
	switch {
	case name == "":
		return errors.New("must not be empty")
	case len(name) > max:
		return fmt.Errorf("must have at most %d characters, got %d", max, len(name))
	case !isASCIIAlnum(name[0]):
		return fmt.Errorf("must start with a letter or digit, got %q", name)
	case strings.HasSuffix(name, "-"):
		return fmt.Errorf("must not end with a hyphen, got %q", name)
	case strings.Contains(name, "--"):
		return fmt.Errorf("must not contain two hyphens in a row, got %q", name)
	}
	for i := range len(name) {
		if c := name[i]; !isASCIIAlnum(c) && c != '-' && c != '_' {
			return fmt.Errorf("may hold only letters, digits, '-' and '_' (smolvm's rule), got %q", name)
		}
	}
	return nil
}

func isASCIIAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func checkBoxName(p any) error { return CheckMachineName(*p.(*string), MachineNameMax) }

func checkBuilderName(p any) error { return CheckMachineName(*p.(*string), SmolvmNameMax) }
