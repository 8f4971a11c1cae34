//go:build !linux && !darwin

package backup

import "errors"

// renameNoReplace is unsupported here: without it a publish could replace
// an existing backup.
func renameNoReplace(oldpath, newpath string) error {
	return wrapRename(oldpath, newpath, errors.New("rename without replace is not supported on this system"))
}
