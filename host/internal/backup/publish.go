package backup

import "os"

func wrapRename(oldpath, newpath string, err error) error {
	if err == nil {
		return nil
	}
	return &os.LinkError{Op: "rename without replace", Old: oldpath, New: newpath, Err: err}
}
