// Package pki issues the certificates of an etcd cluster from a per-cluster CA.
// ECDSA P-256 keys: fast to generate, accepted by every etcd version the operator runs.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Secret keys, as in kubernetes.io/tls Secrets.
const (
	CACertKey  = "ca.crt"
	CAKeyKey   = "ca.key"
	CertKey    = "tls.crt"
	PrivKeyKey = "tls.key"
	// NextCACertKey and NextCAKeyKey hold, in the CA Secret during a CA rotation, the CA that replaces
	// the one in ca.crt/ca.key.
	NextCACertKey = "next-ca.crt"
	NextCAKeyKey  = "next-ca.key"
)

const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 2 * 365 * 24 * time.Hour
	// RenewBefore is how long before expiry a leaf certificate is re-issued.
	RenewBefore = 30 * 24 * time.Hour
	// CARenewBefore is how long before its expiry a CA is rotated: a rotation restarts every member
	// three times, so it starts long before anything is at risk.
	CARenewBefore = 365 * 24 * time.Hour
)

// MinTLSVersion is the oldest TLS version members (--tls-min-version) and the operator accept.
const MinTLSVersion = tls.VersionTLS12

// CipherSuites are the TLS 1.2 suites members (--cipher-suites) and the operator accept: ECDHE key
// exchange (forward secrecy) with an AEAD cipher only — no CBC, no static RSA, no 3DES or RC4. TLS 1.3
// suites are not configurable in Go and are all of this kind. The RSA variants are kept for
// certificates that are not the operator's (the operator's own keys are ECDSA).
func CipherSuites() []uint16 {
	return []uint16{
		tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
		tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
	}
}

// CA is a certificate authority able to sign leaves.
type CA struct {
	Cert *x509.Certificate
	// Key is ECDSA for the CAs the operator makes; a CA taken over with a running cluster
	// (migrateFrom.caSecret) may also have an RSA or Ed25519 key.
	Key crypto.Signer
	// CertPEM is the CA certificate as stored.
	CertPEM []byte
}

// NewCA creates a self-signed CA named cn.
func NewCA(cn string, now time.Time) (*CA, map[string][]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"etcd-autopilot"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("self-sign CA %s: %w", cn, err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	ca, err := LoadCA(map[string][]byte{CACertKey: certPEM, CAKeyKey: keyPEM})
	if err != nil {
		return nil, nil, err
	}
	return ca, map[string][]byte{CACertKey: certPEM, CAKeyKey: keyPEM}, nil
}

// LoadCA reads a CA from Secret data written by NewCA, or by the user (a running cluster's CA: its
// key in SEC 1, PKCS #1 or PKCS #8 PEM). During a CA rotation ca.crt is a bundle whose first
// certificate is the CA of ca.key.
func LoadCA(data map[string][]byte) (*CA, error) {
	return loadCA(data, CACertKey, CAKeyKey)
}

// LoadNextCA reads the CA a rotation moves to (NextCACertKey, NextCAKeyKey); nil when there is none.
func LoadNextCA(data map[string][]byte) (*CA, error) {
	if len(data[NextCACertKey]) == 0 && len(data[NextCAKeyKey]) == 0 {
		return nil, nil
	}
	return loadCA(data, NextCACertKey, NextCAKeyKey)
}

func loadCA(data map[string][]byte, certKey, keyKey string) (*CA, error) {
	cb, _ := pem.Decode(data[certKey])
	kb, _ := pem.Decode(data[keyKey])
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("CA secret lacks a PEM %s or %s", certKey, keyKey)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	key, err := parseKey(kb)
	if err != nil {
		return nil, fmt.Errorf("parse CA key %s: %w", keyKey, err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("%s is not a CA certificate", certKey)
	}
	if pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("%s is not the key of the CA certificate in %s", keyKey, certKey)
	}
	return &CA{Cert: cert, Key: key, CertPEM: pem.EncodeToMemory(cb)}, nil
}

// parseKey reads a private key block as written by the operator (EC PRIVATE KEY) or by common CA
// tools (RSA PRIVATE KEY, PRIVATE KEY).
func parseKey(b *pem.Block) (crypto.Signer, error) {
	switch b.Type {
	case "EC PRIVATE KEY":
		return x509.ParseECPrivateKey(b.Bytes)
	case "RSA PRIVATE KEY":
		return x509.ParsePKCS1PrivateKey(b.Bytes)
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
		if err != nil {
			return nil, err
		}
		if s, ok := k.(crypto.Signer); ok {
			return s, nil
		}
		return nil, fmt.Errorf("a %T cannot sign", k)
	}
	return nil, fmt.Errorf("PEM block %q is not a private key", b.Type)
}

// Bundle is a trust bundle (ca.crt) holding the certificates of cas, in order.
func Bundle(cas ...*CA) []byte {
	var b []byte
	for _, ca := range cas {
		b = append(b, ca.CertPEM...)
	}
	return b
}

// NeedsRotation says whether ca expires within CARenewBefore.
func (ca *CA) NeedsRotation(now time.Time) bool {
	return now.Add(CARenewBefore).After(ca.Cert.NotAfter)
}

// NotAfter is when the first certificate of a PEM block list expires; false when there is none.
// Status reports it per Secret, and an expiry metric can use it as well.
func NotAfter(pemCerts []byte) (time.Time, bool) {
	b, _ := pem.Decode(pemCerts)
	if b == nil {
		return time.Time{}, false
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return time.Time{}, false
	}
	return cert.NotAfter, true
}

// Usage is what a leaf certificate is for.
type Usage int

const (
	// ServerAndClient certificates: etcd peers are both (each dials the others).
	ServerAndClient Usage = iota
	ClientOnly
)

// Issue signs a leaf for cn with the given DNS and IP SANs, and returns Secret data:
// tls.crt, tls.key and ca.crt.
func (ca *CA) Issue(cn string, dnsNames []string, ips []net.IP, usage Usage, now time.Time) (map[string][]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key for %s: %w", cn, err)
	}
	eku := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	if usage == ClientOnly {
		eku = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"etcd-autopilot"}},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  eku,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("sign certificate for %s: %w", cn, err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		CertKey:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		PrivKeyKey: keyPEM,
		CACertKey:  ca.CertPEM,
	}, nil
}

// HasCertificate says whether Secret data holds a parseable leaf certificate.
func HasCertificate(data map[string][]byte) bool {
	_, ok := leaf(data)
	return ok
}

// SignedBy says whether the leaf certificate in Secret data was signed by ca; false when there is
// no parseable certificate.
func (ca *CA) SignedBy(data map[string][]byte) bool {
	cert, ok := leaf(data)
	return ok && cert.CheckSignatureFrom(ca.Cert) == nil
}

func leaf(data map[string][]byte) (*x509.Certificate, bool) {
	b, _ := pem.Decode(data[CertKey])
	if b == nil {
		return nil, false
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	return cert, err == nil
}

// NeedsReissue says whether leaf Secret data is missing, not signed by ca, lacks a wanted DNS name,
// or expires within RenewBefore.
func (ca *CA) NeedsReissue(data map[string][]byte, dnsNames []string, now time.Time) bool {
	cert, ok := leaf(data)
	if !ok || len(data[PrivKeyKey]) == 0 || cert.CheckSignatureFrom(ca.Cert) != nil {
		return true
	}
	if now.Add(RenewBefore).After(cert.NotAfter) {
		return true
	}
	have := map[string]bool{}
	for _, n := range cert.DNSNames {
		have[n] = true
	}
	for _, n := range dnsNames {
		if !have[n] {
			return true
		}
	}
	return false
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	return n
}
