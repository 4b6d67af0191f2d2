package etcdcluster

import (
	"crypto/tls"
	"slices"

	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
)

// etcdConn is one etcd client kept across the passes of a busy cluster (closed after a pass that
// finds nothing to do: releaseIdleClients), identified by the TLS material it was dialed with
// (tlsKey: the Secret's UID and resourceVersion, "" for plain text) and the endpoints it spreads
// calls over. A new identity (a renewed certificate, a rotated CA, a cluster turned to TLS) closes
// the client and dials anew, as etcd's own clients must; new endpoints alone (member pods come and
// go) are moved onto the same client without a dial. The member client and the client of the old
// members of a cluster being taken over are each one etcdConn. Passes of one cluster never run
// concurrently (controller-runtime serialises a key), so it needs no lock.
type etcdConn struct {
	client    *etcdclient.Client
	tlsKey    string
	endpoints []string
}

// get returns the client for endpoints with tlsConfig (nil: plain text), identified by tlsKey.
func (e *etcdConn) get(endpoints []string, tlsConfig *tls.Config, tlsKey string) (*etcdclient.Client, error) {
	endpoints = slices.Sorted(slices.Values(endpoints))
	if tlsConfig == nil {
		tlsKey = "" // a key without material would redial for nothing
	}
	if e.client != nil && e.tlsKey == tlsKey {
		if !slices.Equal(e.endpoints, endpoints) {
			e.client.SetEndpoints(endpoints...)
			e.endpoints = endpoints
		}
		return e.client, nil
	}
	e.close()
	cl, err := etcdclient.New(endpoints, tlsConfig)
	if err != nil {
		return nil, err
	}
	e.client, e.tlsKey, e.endpoints = cl, tlsKey, endpoints
	return cl, nil
}

// close releases the client's connections; the next get dials anew.
func (e *etcdConn) close() {
	if e.client != nil {
		_ = e.client.Close()
	}
	*e = etcdConn{}
}
