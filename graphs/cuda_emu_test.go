package graphs

import (
	"strings"
	"testing"

	"github.com/gozoo/gozoo/internal/cudaemu"
	"github.com/gozoo/gozoo/ops"
)

// TestKernelsEmulatedOps runs graphs' ops' GPU cases (cudaOpCases) in the
// CUDA emulator, outputs and sinks held to the CPU kernels' exactly.
func TestKernelsEmulatedOps(t *testing.T) {
	emu := cudaemu.Build(t)
	for _, c := range cudaOpCases() {
		t.Run(c.op+"/"+strings.ReplaceAll(c.name, "/", "_"), func(t *testing.T) {
			cpu, dev := c.k, c.k
			if k, ok := c.k.(captureCopy); ok {
				cpu, dev = captureCopy{name: k.name, sink: &Sink{}}, captureCopy{name: k.name, sink: &Sink{}}
			}
			want, err := ops.New(cpu).Do(c.in...)
			if err != nil {
				t.Fatal(err)
			}
			got, err := emu.RunOp(dev, c.in...)
			if err != nil {
				t.Fatal(err)
			}
			sameValues(t, "output", got, want)
			if k, ok := dev.(captureCopy); ok {
				sameValues(t, "sink", SinkValue(k.sink), SinkValue(cpu.(captureCopy).sink))
			}
		})
	}
}
