//go:build !linux

package live

import "net"

// watchHangup calls gone once the peer of a hijacked connection hangs up (watchByReading;
// Linux watches every stream with one epoll instance instead).
func watchHangup(nc net.Conn, gone func()) (unwatch func()) { return watchByReading(nc, gone) }
