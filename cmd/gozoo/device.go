package main

import (
	"flag"
	"fmt"

	"github.com/gozoo/gozoo/cuda"
)

// deviceFlag declares --device on a command that runs a model.
func deviceFlag(fs *flag.FlagSet) *string {
	return fs.String("device", "cpu", "run on `cpu`, cuda or cuda:N (an NVIDIA GPU: libcuda and cuBLAS are loaded at run time)")
}

// openDevice opens the device --device names (nil for the CPU); its error
// is one line naming the library or device at fault.
func openDevice(name string) (cuda.Backend, error) {
	dev, err := cuda.ParseDevice(name)
	if err != nil {
		return nil, fmt.Errorf("--device %s: %w", name, err)
	}
	if dev == nil {
		return nil, nil // the CPU: a nil Backend, not a nil *Device in one
	}
	return dev, nil
}
