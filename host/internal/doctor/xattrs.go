package doctor

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/hermes-box/hermes-box/host/internal/smolvm"
)

// The file the xattrs row marks in the throwaway machine, and its
// attribute. GNU tar (in every Ubuntu image; the attr tools are not)
// writes and reads the attribute: a PAX record SCHILY.xattr.<name>.
const (
	xattrFile   = "hbx-doctor-xattr"
	xattrName   = "user.hbx-doctor"
	xattrRecord = "SCHILY.xattr." + xattrName
)

// tarXattrs are GNU tar's flags that carry user.* attributes.
var tarXattrs = []string{"tar", "--xattrs", "--xattrs-include=user.*"}

// markXattr writes /hbx-doctor-xattr with the attribute into the running
// throwaway machine and reads it back, so that the xattrs row can tell a
// guest that cannot hold the attribute from a pack that drops it.
func (s *state) markXattr(ctx context.Context) error {
	var arc bytes.Buffer
	tw := tar.NewWriter(&arc)
	body := []byte("hermes-box doctor: this file carries " + xattrName + "\n")
	err := tw.WriteHeader(&tar.Header{Name: xattrFile, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg,
		Format: tar.FormatPAX, PAXRecords: map[string]string{xattrRecord: s.xattrValue}})
	if err == nil {
		_, err = tw.Write(body)
	}
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		return err
	}
	res, err := s.d.VM.Exec(ctx, smolvm.ExecSpec{Name: s.d.Name, Stdin: &arc,
		Argv: append(append([]string(nil), tarXattrs...), "-x", "-f", "-", "-C", "/")})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("tar -x exited %d: %s", res.ExitCode, lastLine(string(res.Stderr)))
	}
	got, err := s.readXattr(ctx, s.d.Name)
	if err == nil && got != s.xattrValue {
		err = fmt.Errorf("the guest's file system did not keep %s on /%s", xattrName, xattrFile)
	}
	return err
}

// readXattr is the attribute's value on /hbx-doctor-xattr in the machine,
// "" when the file has none.
func (s *state) readXattr(ctx context.Context, machine string) (string, error) {
	var out bytes.Buffer
	res, err := s.d.VM.Exec(ctx, smolvm.ExecSpec{Name: machine, Stdout: &out,
		Argv: append(append([]string(nil), tarXattrs...), "-c", "-f", "-", "-C", "/", xattrFile)})
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", fmt.Errorf("tar -c /%s in %s exited %d: %s", xattrFile, machine, res.ExitCode, lastLine(string(res.Stderr)))
	}
	tr := tar.NewReader(&out)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", fmt.Errorf("tar -c in %s wrote no %s", machine, xattrFile)
		}
		if err != nil {
			return "", fmt.Errorf("reading tar -c's archive from %s: %w", machine, err)
		}
		if h.Name == xattrFile {
			return h.PAXRecords[xattrRecord], nil
		}
	}
}

// xattrsPack: the attribute marked before the pack (packLayout) is on the
// file in the machine created from the pack, started by the secrets row.
func (s *state) xattrsPack(ctx context.Context) (string, error) {
	if s.markErr != nil {
		return "", fmt.Errorf("marking /%s with %s before the pack: %w", xattrFile, xattrName, s.markErr)
	}
	packed := s.d.Name + "-packed"
	m, err := s.d.VM.Status(ctx, packed)
	if err == nil && m.State != smolvm.StateRunning {
		err = s.d.VM.Start(ctx, packed)
	}
	if err != nil {
		return "", err
	}
	got, err := s.readXattr(ctx, packed)
	switch {
	case err != nil:
		return "", err
	case got == "":
		return "", fmt.Errorf("pack create --from-vm dropped %s: /%s in the machine created from the pack has no such attribute", xattrName, xattrFile)
	case got != s.xattrValue:
		return "", fmt.Errorf("pack create --from-vm changed %s on /%s: %q, not %q", xattrName, xattrFile, got, s.xattrValue)
	}
	return fmt.Sprintf("%s on /%s survived pack create --from-vm", xattrName, xattrFile), nil
}
