package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func encode(t testing.TB, f Frame) []byte {
	t.Helper()
	b, err := Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReaderSkipsGarbageAndCutFrames(t *testing.T) {
	a := Frame{Session: 1, Type: Exec, Payload: []byte(`{"argv":["true"]}`)}
	b := Frame{Session: 2, Type: Stdout, Payload: []byte("hello")}
	cut := encode(t, Frame{Session: 9, Type: Data, Payload: bytes.Repeat([]byte("x"), 100)})[:20]
	huge := append([]byte(Magic), 0, 0, 0, 0, 0, 0, 0, 3, 'D', 0xff, 0xff, 0xff, 0xff)
	tests := []struct {
		name   string
		stream []byte
		want   []Frame
	}{
		{"plain", append(encode(t, a), encode(t, b)...), []Frame{a, b}},
		{"garbage first", append([]byte("noise SMQ"), encode(t, a)...), []Frame{a}},
		{"oversized length", append(huge, encode(t, b)...), []Frame{b}},
		{"cut frame at the end", append(encode(t, a), cut...), []Frame{a}},
		{"empty payload", encode(t, Frame{Session: 3, Type: Ping}), []Frame{{Session: 3, Type: Ping, Payload: []byte{}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(bytes.NewReader(tt.stream))
			for i, want := range tt.want {
				got, err := r.Next()
				if err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				if got.Session != want.Session || got.Type != want.Type || !bytes.Equal(got.Payload, want.Payload) {
					t.Fatalf("frame %d: got %+v, want %+v", i, got, want)
				}
			}
			if _, err := r.Next(); !errors.Is(err, io.EOF) {
				t.Fatalf("after the frames: %v, want EOF", err)
			}
		})
	}
}

func TestEncodeRefusesOversizedPayload(t *testing.T) {
	if _, err := Encode(Frame{Payload: make([]byte, MaxPayload+1)}); err == nil {
		t.Fatal("no error for an oversized payload")
	}
}

func FuzzReader(f *testing.F) {
	f.Add(encode(f, Frame{Session: 7, Type: Exit, Payload: []byte(`{"code":3}`)}))
	f.Add([]byte("SMQ1SMQ1garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data))
		for range 1000 {
			fr, err := r.Next()
			if err != nil {
				return
			}
			if len(fr.Payload) > MaxPayload {
				t.Fatalf("payload of %d bytes", len(fr.Payload))
			}
			again, err := Encode(fr)
			if err != nil || !bytes.Contains(data, again) {
				t.Fatalf("frame %+v is not in the input", fr)
			}
		}
	})
}
