package protocol

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

const zeroSum = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

func TestApplyStreamGolden(t *testing.T) {
	var b bytes.Buffer
	err := WriteApplyStream(&b, []ApplyPart{
		{Name: ApplyPartKey, Size: 3, SHA256: zeroSum, Body: strings.NewReader("key")},
		{Name: boxlayout.PartRootfs, Size: 0, SHA256: zeroSum, Body: strings.NewReader("")},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := ApplyMagic + "\npart authorized-key 3 " + zeroSum + "\nkeypart rootfs 0 " + zeroSum + "\nend\n"
	if b.String() != want {
		t.Fatalf("stream %q, want %q", b.String(), want)
	}
	if err := WriteApplyStream(&b, []ApplyPart{{Name: "x", Size: 5, Body: strings.NewReader("abc")}}); err == nil {
		t.Fatal("short part accepted")
	}
}

func FuzzParseApplyHeader(f *testing.F) {
	f.Add("part rootfs 12 " + zeroSum)
	f.Add("part rootfs -1 " + zeroSum)
	f.Fuzz(func(t *testing.T, line string) {
		p, err := ParseApplyHeader(line, boxlayout.PartRootfs)
		if err != nil {
			return
		}
		if p.Size < 0 || p.Header() != line {
			t.Fatalf("%q parsed as %+v", line, p)
		}
	})
}
