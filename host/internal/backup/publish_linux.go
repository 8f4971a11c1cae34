//go:build linux

package backup

import "golang.org/x/sys/unix"

// renameNoReplace renames oldpath to newpath, failing with EEXIST (which
// errors.Is matches as fs.ErrExist) when newpath exists, even as an empty
// directory that a plain rename would replace.
func renameNoReplace(oldpath, newpath string) error {
	return wrapRename(oldpath, newpath, unix.Renameat2(unix.AT_FDCWD, oldpath, unix.AT_FDCWD, newpath, unix.RENAME_NOREPLACE))
}
