package graphs

// FakeDeviceKV makes l.Device() return d, for tests of attention kernels
// outside a device-backed pool: host tests give d fake addresses, GPU
// tests the addresses of blocks they uploaded themselves. The pool's host
// memory stays as it is, so the CPU kernel still runs over it.
func FakeDeviceKV(l *LayerKV, d *DeviceKV) {
	if l.pool.dev == nil {
		l.pool.dev = &poolDevice{}
	}
	if l.pool.dev.kv == nil {
		l.pool.dev.kv = map[*kvStore]*DeviceKV{}
	}
	l.pool.dev.kv[l.store] = d
}
