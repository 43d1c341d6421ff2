package images

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/png"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/internal/canceltest"
	"github.com/gozoo/gozoo/internal/leaktest"
)

// TestMain fails the package's run if a test leaves a goroutine behind:
// the resizer's row workers must all have returned, cancelled or not.
func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

// TestResizeContext cancels a resize big enough to run on several
// goroutines at every poll in turn: each stops with an error wrapping
// context.Canceled that names the sizes, no worker is left running, and
// an uncancelled run equals Resize's.
func TestResizeContext(t *testing.T) {
	src := lcgImage(1200, 900, 5)
	want, err := Resize(src, 500, 700, Lanczos)
	if err != nil {
		t.Fatal(err)
	}
	stopped := 0
	for n := 0; ; n++ {
		ctx := canceltest.After(n)
		got, err := ResizeContext(ctx, src, 500, 700, Lanczos)
		if err == nil {
			if !bytes.Equal(got.Pix, want.Pix) {
				t.Fatal("a cancellable resize differs from Resize")
			}
			break
		}
		stopped++
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "resize 1200x900 to 500x700") {
			t.Fatalf("cancelled at poll %d: %v", n+1, err)
		}
		if n > 10000 {
			t.Fatal("the resize never ran to its end")
		}
	}
	if stopped < 4 {
		t.Errorf("only %d polls: the passes do not check their context between row blocks", stopped)
	}
	leaktest.VerifyNone(t)
}

// TestDecodeContext stops a PNG decode inside the decoder (its reads of
// the file fail once the context is done) and a cancelled Open before it
// reads anything.
func TestDecodeContext(t *testing.T) {
	m := image.NewNRGBA(image.Rect(0, 0, 300, 200))
	for i := range m.Pix {
		m.Pix[i] = byte(i * 31)
	}
	var buf bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.NoCompression}).Encode(&buf, m); err != nil {
		t.Fatal(err)
	}
	want, err := Decode(bytes.NewReader(buf.Bytes()), "x.png", 0)
	if err != nil {
		t.Fatal(err)
	}
	// Reading the whole file polls a few times; the decoder many more.
	stages := map[string]bool{}
	for n := 0; ; n++ {
		got, err := DecodeContext(canceltest.After(n), bytes.NewReader(buf.Bytes()), "x.png", 0)
		if err == nil {
			if !bytes.Equal(got.Pix, want.Pix) {
				t.Fatal("a cancellable decode differs from Decode")
			}
			break
		}
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "image x.png") {
			t.Fatalf("cancelled at poll %d: %v", n+1, err)
		}
		for _, s := range []string{"reading stopped", "decoding png stopped", "stopped after converting"} {
			if strings.Contains(err.Error(), s) {
				stages[s] = true
			}
		}
		if n > 10000 {
			t.Fatal("the decode never ran to its end")
		}
	}
	for _, s := range []string{"reading stopped", "decoding png stopped", "stopped after converting"} {
		if !stages[s] {
			t.Errorf("no cancellation gave %q (got %v)", s, stages)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := OpenContext(ctx, "no/such/file.png", 0); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "no/such/file.png") {
		t.Fatalf("Open with a cancelled context: %v", err)
	}
}
