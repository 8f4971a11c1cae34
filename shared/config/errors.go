package config

import (
	"errors"
	"fmt"
)

// ErrInvalid matches, through errors.Is, every problem with the configuration
// itself: a malformed line, an unknown or invalid setting, a bad secret
// mapping or an unset secret. Failures to read a file do not match it.
var ErrInvalid = errors.New("invalid hermes-box configuration")

// Error is one configuration problem. A problem found in a file carries the
// file and line; any other problem names the variable it is about in Msg.
// Msg never contains the value of a secret.
type Error struct {
	File string // file the problem is in; "" for the environment and validation
	Line int    // 1-based line in File; 0 when File is ""
	Key  string // variable the problem is about; "" when there is none
	Msg  string // lowercase description, without the file and line
}

// Error returns "file:line: msg" for problems in a file and Msg otherwise.
func (e *Error) Error() string {
	if e.File == "" {
		return e.Msg
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// Is reports whether target is ErrInvalid.
func (e *Error) Is(target error) bool {
	return target == ErrInvalid
}
