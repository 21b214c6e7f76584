package server_test

import (
	"net/netip"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/acl"
)

// The README's ACL file is a file the broker loads, and means what the
// README says of it: the app may publish to orders-*, not to orders-audit
// (Deny wins), and only from the listed address.
func TestREADMEACLFileLoadsAndMeansWhatItSays(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	require.Len(t, blocks, 1, "the README's ACL file")
	cfg, err := acl.Parse([]byte(blocks[0][1]))
	require.NoError(t, err)
	a, err := acl.New(cfg, acl.Options{})
	require.NoError(t, err)
	local := netip.MustParseAddr("127.0.0.1")
	d, err := a.Authorize("orders-app", acl.Topic("orders-eu"), acl.Pub, local)
	require.NoError(t, err)
	require.Equal(t, acl.Allow, d)
	d, _ = a.Authorize("orders-app", acl.Topic("orders-audit"), acl.Pub, local)
	require.Equal(t, acl.Deny, d, "Deny over Allow")
	d, _ = a.Authorize("orders-app", acl.Topic("orders-eu"), acl.Pub, netip.MustParseAddr("10.1.2.3"))
	require.Equal(t, acl.Deny, d, "outside the source IPs")
	d, _ = a.Authorize("orders-app", acl.Group("orders-workers"), acl.Sub, local)
	require.Equal(t, acl.Allow, d)
	d, _ = a.Authorize("admin", acl.Topic("anything"), acl.Delete, netip.MustParseAddr("10.1.2.3"))
	require.Equal(t, acl.Allow, d, "super user")
}
