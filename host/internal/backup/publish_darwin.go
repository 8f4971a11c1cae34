//go:build darwin

package backup

import "golang.org/x/sys/unix"

// renameNoReplace renames oldpath to newpath, failing with EEXIST (which
// errors.Is matches as fs.ErrExist) when newpath exists, even as an empty
// directory that a plain rename would replace.
func renameNoReplace(oldpath, newpath string) error {
	return wrapRename(oldpath, newpath, unix.RenamexNp(oldpath, newpath, unix.RENAME_EXCL))
}
