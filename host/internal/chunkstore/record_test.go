package chunkstore

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/host/internal/auditanchor"
	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

type tfile struct {
	name string
	body []byte
}

// boxParts is a small box at generation gen: a rootfs and a workspace
// with what a restore needs. Each generation rewrites two small files
// and 1% of the large file's bytes (half overwritten, half inserted).
func boxParts(gen int) map[string][]tfile {
	big := chunk("big", 0, 4<<20, true)
	for g := 1; g <= gen; g++ {
		at := g * (1 << 20)
		copy(big[at:], chunk("over", g, 20<<10, true))
		big = append(big[:at+(2<<20)], append(chunk("ins", g, 20<<10, true), big[at+(2<<20):]...)...)
	}
	root := []tfile{{"etc/", nil}, {"etc/hostname", []byte("box\n")}, {"usr/", nil}, {"usr/lib/", nil}}
	for i := range 40 {
		body := chunk("lib", i, 30<<10, i%3 == 0)
		if i < 2 {
			body = chunk(fmt.Sprintf("lib-gen%d", gen), i, 30<<10, false)
		}
		root = append(root, tfile{fmt.Sprintf("usr/lib/lib%02d.so", i), body})
	}
	ws := []tfile{{"hermes-home/", nil}, {"hermes-home/config.yaml", []byte("model: x\n")},
		{"codex-home/", nil}, {"codex-home/config.toml", []byte("x = 1\n")},
		{"work/", nil}, {"work/big.bin", big}, {"work/notes.txt", fmt.Appendf(nil, "generation %d\n", gen)}}
	return map[string][]tfile{boxlayout.PartRootfs: root, boxlayout.PartWorkspace: ws}
}

func gzipTar(files []tfile) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	mt := time.Unix(1700000000, 0)
	_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "./", Mode: 0o755, ModTime: mt})
	for _, f := range files {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.body)), ModTime: mt}
		if strings.HasSuffix(f.name, "/") {
			h = &tar.Header{Typeflag: tar.TypeDir, Name: f.name, Mode: 0o755, ModTime: mt}
		}
		_ = tw.WriteHeader(h)
		_, _ = tw.Write(f.body)
	}
	_ = tw.Close()
	_ = zw.Close()
	return b.Bytes()
}

var testLimits = backup.Limits{FreeSpace: func(string) (int64, error) { return 1 << 50, nil }}

// signerFrom is an Ed25519 project key made from seed.
func signerFrom(seed byte) ssh.Signer {
	s, err := ssh.NewSignerFromKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize)))
	if err != nil {
		panic(err)
	}
	return s
}

var (
	projectKey = signerFrom(1)
	trust      = backup.Trust{Key: projectKey.PublicKey()}
)

func meta(n int) backup.Meta {
	return backup.Meta{Machine: "box", Label: fmt.Sprintf("gen%d", n), Smolvm: "1.9.3", GOOS: "linux",
		Signer: projectKey, Now: time.Date(2026, 1, 1, 0, n, 0, 0, time.UTC), Limits: testLimits}
}

func snapshot(t testing.TB, backups string, gen int) (string, *Record) {
	t.Helper()
	dir, rec, err := Ingest(context.Background(), backups, meta(gen), chunkAgent(boxParts(gen), agentMutation{}, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	return dir, rec
}

// restored stages the backup in dir from the store and checks the
// staged copy is a valid v2 backup whose parts equal generation gen's.
func restored(t testing.TB, backups, dir string, gen int) {
	t.Helper()
	rec, err := Load(dir, trust)
	if err != nil {
		t.Fatal(err)
	}
	stagesAs(t, openStore(t, StoreDir(backups, "box")), rec, gen)
}

// stagesAs stages rec from s and checks the staged copy is a valid v2
// backup whose parts equal generation gen's.
func stagesAs(t testing.TB, s *Store, rec *Record, gen int) {
	t.Helper()
	staged, err := s.Stage(context.Background(), rec, t.TempDir(), testLimits, projectKey)
	if err != nil {
		t.Fatal(err)
	}
	defer staged.Remove()
	v2 := staged.Dir
	if _, err := backup.Verify(context.Background(), v2, trust); err != nil {
		t.Fatalf("staged backup: %v", err)
	}
	for _, p := range backup.Parts {
		data, err := os.ReadFile(filepath.Join(v2, p.File))
		must(t, err)
		if got, want := tarSums(t, data), tarSums(t, gzipTar(boxParts(gen)[p.Name])); got != want {
			t.Fatalf("%s restored:\n%s\nwant:\n%s", p.Name, got, want)
		}
	}
}

func tarSums(t testing.TB, gz []byte) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	must(t, err)
	tr := tar.NewReader(zr)
	var b strings.Builder
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return b.String()
		}
		must(t, err)
		body, err := io.ReadAll(tr)
		must(t, err)
		fmt.Fprintf(&b, "%c %s %o %s %x\n", h.Typeflag, h.Name, h.Mode, h.ModTime.UTC(), sha256.Sum256(body))
	}
}

func TestSnapshotIncrementalRoundTrip(t *testing.T) {
	backups := t.TempDir()
	dir1, rec1 := snapshot(t, backups, 0)
	dir2, rec2 := snapshot(t, backups, 1)
	if filepath.Base(dir1) != "box-"+time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Local().Format("20060102-150405")+"-gen0.hermesbox" {
		t.Fatalf("backup named %s", dir1)
	}
	total := rec1.Parts[boxlayout.PartRootfs].Bytes + rec1.Parts[boxlayout.PartWorkspace].Bytes
	if rec1.Added.Bytes < total || rec2.Added.Bytes > total/5 || rec2.Added.Chunks == 0 {
		t.Fatalf("first added %+v, second %+v, of %d bytes", rec1.Added, rec2.Added, total)
	}
	s := openStore(t, StoreDir(backups, "box"))
	for _, rec := range []*Record{rec1, rec2} {
		for _, readData := range []bool{false, true} {
			if err := s.Verify(context.Background(), rec, readData); err != nil {
				t.Fatalf("verify (read data %v): %v", readData, err)
			}
		}
	}
	restored(t, backups, dir1, 0)
	restored(t, backups, dir2, 1)
}

func TestSnapshotRefusesAndLeavesNothing(t *testing.T) {
	noConfig := boxParts(0)
	noConfig[boxlayout.PartWorkspace] = noConfig[boxlayout.PartWorkspace][2:]
	unsafe := boxParts(0)
	unsafe[boxlayout.PartRootfs] = append(unsafe[boxlayout.PartRootfs], tfile{"../escape", []byte("x")})
	full := func(string) (int64, error) { return 100 << 20, nil }
	tests := []struct {
		name  string
		parts map[string][]tfile
		lim   backup.Limits
		want  error
	}{
		{"workspace without Hermes' config", noConfig, testLimits, backup.ErrInvalid},
		{"unsafe name", unsafe, testLimits, backup.ErrInvalid},
		{"part over the cap", boxParts(0), backup.Limits{MaxPart: 1 << 20, FreeSpace: testLimits.FreeSpace}, backup.ErrLimit},
		{"too many entries", boxParts(0), backup.Limits{MaxEntries: 10, FreeSpace: testLimits.FreeSpace}, backup.ErrLimit},
		{"unpacks too large", boxParts(0), backup.Limits{MaxUnpacked: 1 << 20, FreeSpace: testLimits.FreeSpace}, backup.ErrLimit},
		{"host disk full", boxParts(0), backup.Limits{FreeSpace: full}, backup.ErrNoSpace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			backups := t.TempDir()
			dir, _ := snapshot(t, backups, 0)
			storeFiles := files(t, StoreDir(backups, "box"))
			mt := meta(1)
			mt.Limits = tt.lim
			_, _, err := Ingest(context.Background(), backups, mt, chunkAgent(tt.parts, agentMutation{}, nil), nil)
			wantErr(t, err, tt.want)
			if got := strings.Join(files(t, StoreDir(backups, "box")), " "); got != strings.Join(storeFiles, " ") {
				t.Fatalf("store after a refused snapshot: %s, before: %s", got, strings.Join(storeFiles, " "))
			}
			entries, _ := os.ReadDir(backups)
			if len(entries) != 2 { // the first backup and the stores
				t.Fatalf("backups dir holds %v", entries)
			}
			restored(t, backups, dir, 0)
		})
	}
}

// TestRecordCarriesAuditAnchor: an incremental record carries the host's
// audit anchor as a v2 manifest does (restore installs the one of the
// v2 backup the record is staged as); an anchor that is not one
// line is refused before anything is written.
func TestRecordCarriesAuditAnchor(t *testing.T) {
	backups := t.TempDir()
	line := auditanchor.Anchor{Count: 3, Bytes: 300, Prefix: strings.Repeat("a", 64), Head: strings.Repeat("b", 64),
		Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}.Line()
	m := meta(0)
	m.AuditAnchor = line
	dir, _, err := Ingest(context.Background(), backups, m, chunkAgent(boxParts(0), agentMutation{}, nil), nil)
	must(t, err)
	rec, err := Load(dir, trust)
	must(t, err)
	if rec.AuditAnchor != line {
		t.Fatalf("the record's anchor %q, want %q", rec.AuditAnchor, line)
	}
	staged, err := openStore(t, StoreDir(backups, "box")).Stage(context.Background(), rec, t.TempDir(), testLimits, projectKey)
	must(t, err)
	defer staged.Remove()
	v, err := backup.Verify(context.Background(), staged.Dir, trust)
	must(t, err)
	if v.Manifest.AuditAnchor != line || staged.Manifest.AuditAnchor != line {
		t.Fatalf("the staged manifest's anchor %q (%q returned), want %q", v.Manifest.AuditAnchor, staged.Manifest.AuditAnchor, line)
	}

	m = meta(1)
	m.AuditAnchor = line + "\naudit_anchor=forged"
	if _, _, err := Ingest(context.Background(), backups, m, chunkAgent(boxParts(1), agentMutation{}, nil), nil); err == nil ||
		!strings.Contains(err.Error(), "audit anchor must be one line") {
		t.Fatalf("a two-line anchor: %v", err)
	}
	if dirs, _, err := Backups(backups, "box", trust); err != nil || len(dirs) != 1 {
		t.Fatalf("backups after the refused one: %v %v", dirs, err)
	}
}

func TestRecordHostile(t *testing.T) {
	backups := t.TempDir()
	dir, _ := snapshot(t, backups, 0)
	good, err := os.ReadFile(filepath.Join(dir, RecordFile))
	must(t, err)
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		must(t, json.Unmarshal(good, &m))
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	sign := func(key ssh.Signer, data []byte) []byte {
		sig, err := keys.Sign(key, backup.SignatureNamespace, bytes.NewReader(data))
		must(t, err)
		return sig
	}
	tests := []struct {
		name      string
		data, sig []byte
		want      error
	}{
		{"unknown field", edit(func(m map[string]any) { m["extra"] = 1 }), nil, backup.ErrInvalid},
		{"other format", edit(func(m map[string]any) { m["format"] = "hermes-box-v2" }), nil, backup.ErrInvalid},
		{"other chunker", edit(func(m map[string]any) { m["chunker"] = "rabin" }), nil, backup.ErrInvalid},
		{"a part missing", edit(func(m map[string]any) { delete(m["parts"].(map[string]any), "rootfs") }), nil, backup.ErrInvalid},
		{"a bad tree id", edit(func(m map[string]any) {
			m["parts"].(map[string]any)["rootfs"].(map[string]any)["tree"] = []string{"ABC"}
		}), nil, backup.ErrInvalid},
		{"an audit anchor that does not parse", edit(func(m map[string]any) { m["audit_anchor"] = `{"count":3}` }), nil, backup.ErrInvalid},
		{"another signer recorded", edit(func(m map[string]any) {
			m["ssh_key_fingerprint"] = keys.Fingerprint(signerFrom(2).PublicKey())
		}), nil, backup.ErrInvalid},
		{"too large", append(bytes.Clone(good), bytes.Repeat([]byte(" "), maxRecord)...), nil, backup.ErrInvalid},
		{"not json", []byte("{"), nil, backup.ErrInvalid},
		{"changed after signing", edit(func(m map[string]any) { m["label"] = "other" }), sign(projectKey, good), backup.ErrInvalid},
		{"signed by another key", good, sign(signerFrom(2), good), backup.ErrForeign},
		{"unsigned", good, []byte{}, backup.ErrUnsigned},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := t.TempDir()
			must(t, os.WriteFile(filepath.Join(d, RecordFile), tt.data, 0o600))
			switch {
			case tt.sig == nil:
				must(t, os.WriteFile(filepath.Join(d, RecordSignature), sign(projectKey, tt.data), 0o600))
			case len(tt.sig) > 0:
				must(t, os.WriteFile(filepath.Join(d, RecordSignature), tt.sig, 0o600))
			}
			_, err := Load(d, trust)
			wantErr(t, err, tt.want)
		})
	}
	if _, err := Load(dir, trust); err != nil {
		t.Fatalf("the good record: %v", err)
	}
}

// TestMissingAndCorruptChunks: a record naming a chunk the store lost
// fails verification; a corrupt chunk fails verification (its sample
// reads a small store whole), is set aside, and then fails reading
// verification and the restore as set aside, which publishes nothing.
func TestMissingAndCorruptChunks(t *testing.T) {
	for _, tt := range []struct {
		name             string
		damage           func(t *testing.T, store string)
		quick, read, mat error
	}{
		{"pack deleted", func(t *testing.T, store string) {
			must(t, os.Remove(largest(t, store, packsDir)))
		}, ErrMissing, ErrMissing, ErrMissing},
		{"chunk corrupt", func(t *testing.T, store string) {
			flip(t, largest(t, store, packsDir), 5000)
		}, ErrCorrupt, ErrDamaged, ErrDamaged}, // the sample reads it and sets it aside
	} {
		t.Run(tt.name, func(t *testing.T) {
			backups := t.TempDir()
			_, rec := snapshot(t, backups, 0)
			tt.damage(t, StoreDir(backups, "box"))
			s := openStore(t, StoreDir(backups, "box"))
			wantErr(t, s.Verify(context.Background(), rec, false), tt.quick)
			wantErr(t, s.Verify(context.Background(), rec, true), tt.read)
			parent := t.TempDir()
			_, err := s.Stage(context.Background(), rec, parent, testLimits, projectKey)
			wantErr(t, err, tt.mat)
			if entries, _ := os.ReadDir(parent); len(entries) != 0 {
				t.Fatalf("a failed restore left %v", entries)
			}
		})
	}
}
