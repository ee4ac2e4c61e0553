package outbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// MaxURL is the longest endpoint URL.
const MaxURL = 2048

// Addresses an endpoint may never reach, even with private addresses allowed: the cloud
// providers' metadata services (AWS's IPv6 one and Alibaba's are outside link-local).
var metadata = []netip.Prefix{
	netip.MustParsePrefix("fd00:ec2::254/128"),
	netip.MustParsePrefix("100.100.100.200/32"),
}

// Private ranges beyond what netip's IsPrivate knows: carrier-grade NAT.
var alsoPrivate = []netip.Prefix{netip.MustParsePrefix("100.64.0.0/10")}

// refusal says why an address may not be reached ("" when it may): link-local, metadata,
// multicast and unspecified addresses always; loopback and private ones unless allowPrivate.
func refusal(ip netip.Addr, allowPrivate bool) string {
	ip = ip.Unmap()
	for _, p := range metadata {
		if p.Contains(ip) {
			return "a cloud metadata address"
		}
	}
	switch {
	case ip.IsUnspecified():
		return "an unspecified address"
	case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast():
		return "a link-local address"
	case ip.IsMulticast() || ip.IsInterfaceLocalMulticast():
		return "a multicast address"
	case allowPrivate:
		return ""
	case ip.IsLoopback():
		return "a loopback address"
	case ip.IsPrivate():
		return "a private address"
	}
	for _, p := range alsoPrivate {
		if p.Contains(ip) {
			return "a private address"
		}
	}
	return ""
}

// errRefusedAddress is the dialer's refusal of an address (DNS answers change between the
// registration's check and a delivery).
var errRefusedAddress = errors.New("refused address")

// control is the dialer's check of every address it connects to, after resolution.
func control(allowPrivate bool) func(network, address string, _ syscall.RawConn) error {
	return func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: %s", errRefusedAddress, address)
		}
		if why := refusal(ap.Addr(), allowPrivate); why != "" {
			return fmt.Errorf("%w: %s is %s", errRefusedAddress, ap.Addr(), why)
		}
		return nil
	}
}

// checkURL applies the rules of an endpoint's URL, resolving its host: the sentence says why it
// is refused ("" when it is not).
func checkURL(ctx context.Context, raw string, allowPrivate bool) string {
	if len(raw) > MaxURL {
		return fmt.Sprintf("The URL is longer than %d characters.", MaxURL)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return "The URL cannot be read: write it whole, like https://example.com/webhooks."
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return "The URL must start with https:// (or http://)."
	}
	if u.User != nil {
		return "The URL must not carry a user name or password."
	}
	if u.Fragment != "" {
		return "The URL must not have a fragment (#…)."
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		if why := refusal(ip, allowPrivate); why != "" {
			return fmt.Sprintf("The URL points to %s, which Sandman does not send to.", why)
		}
		return ""
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(rctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return fmt.Sprintf("The host %s does not resolve: check its name.", host)
	}
	for _, a := range addrs {
		if why := refusal(a, allowPrivate); why != "" {
			return fmt.Sprintf("The host %s resolves to %s, which Sandman does not send to.", host, why)
		}
	}
	return ""
}
