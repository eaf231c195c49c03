package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
)

// JWKS is a set of public keys for verifying JWTs, by key id ("" for a key
// without one).
type JWKS map[string]crypto.PublicKey

// jwk is the JSON of one key of a JWKS (RFC 7517, 7518, 8037).
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Crv string `json:"crv"`
	N   string `json:"n"`
	E   string `json:"e"`
	X   string `json:"x"`
	Y   string `json:"y"`
	D   string `json:"d"`
}

// ParseJWKS parses a JSON Web Key Set ({"keys": [...]}) of RSA, EC
// (P-256, P-384, P-521) and OKP (Ed25519) public keys. Keys whose use is
// not "sig" are skipped; a private key, a malformed key or two keys with
// one id are errors naming the key.
func ParseJWKS(data []byte) (JWKS, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("JWKS: %v", err)
	}
	if set.Keys == nil {
		return nil, fmt.Errorf(`JWKS: no "keys" array`)
	}
	out := make(JWKS, len(set.Keys))
	for i, raw := range set.Keys {
		var k jwk
		if err := json.Unmarshal(raw, &k); err != nil {
			return nil, fmt.Errorf("JWKS: key %d: %v", i+1, err)
		}
		where := fmt.Sprintf("JWKS: key %d", i+1)
		if k.Kid != "" {
			where += fmt.Sprintf(" (kid %q)", k.Kid)
		}
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		if k.D != "" {
			return nil, fmt.Errorf("%s: holds a private key; the JWKS file takes public keys only", where)
		}
		pub, err := k.publicKey()
		if err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		if _, dup := out[k.Kid]; dup {
			return nil, fmt.Errorf("%s: the key id is used twice", where)
		}
		out[k.Kid] = pub
	}
	return out, nil
}

func (k jwk) publicKey() (crypto.PublicKey, error) {
	switch k.Kty {
	case "RSA":
		n, err := b64Int(k.N, "n")
		if err != nil {
			return nil, err
		}
		e, err := b64Int(k.E, "e")
		if err != nil {
			return nil, err
		}
		if n.BitLen() < 2048 {
			return nil, fmt.Errorf("an RSA key of %d bits is too short (at least 2048)", n.BitLen())
		}
		if !e.IsInt64() || e.Int64() < 3 || e.Int64() > 1<<31-1 || e.Bit(0) == 0 {
			return nil, fmt.Errorf("the RSA exponent e is not an odd number from 3 to 2^31-1")
		}
		return &rsa.PublicKey{N: n, E: int(e.Int64())}, nil
	case "EC":
		var c elliptic.Curve
		switch k.Crv {
		case "P-256":
			c = elliptic.P256()
		case "P-384":
			c = elliptic.P384()
		case "P-521":
			c = elliptic.P521()
		default:
			return nil, fmt.Errorf("EC curve %q is not P-256, P-384 or P-521", k.Crv)
		}
		x, err := b64Bytes(k.X, "x")
		if err != nil {
			return nil, err
		}
		y, err := b64Bytes(k.Y, "y")
		if err != nil {
			return nil, err
		}
		size := (c.Params().BitSize + 7) / 8
		if len(x) != size || len(y) != size {
			return nil, fmt.Errorf("x and y of a %s key must be %d bytes", k.Crv, size)
		}
		point := append(append([]byte{4}, x...), y...)
		pub, err := ecdsa.ParseUncompressedPublicKey(c, point)
		if err != nil {
			return nil, fmt.Errorf("the point (x, y) is not on curve %s", k.Crv)
		}
		return pub, nil
	case "OKP":
		if k.Crv != "Ed25519" {
			return nil, fmt.Errorf("OKP curve %q is not Ed25519", k.Crv)
		}
		x, err := b64Bytes(k.X, "x")
		if err != nil {
			return nil, err
		}
		if len(x) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("x of an Ed25519 key must be %d bytes", ed25519.PublicKeySize)
		}
		return ed25519.PublicKey(x), nil
	case "":
		return nil, fmt.Errorf("kty is missing")
	default:
		return nil, fmt.Errorf("kty %q is not RSA, EC or OKP", k.Kty)
	}
}

func b64Bytes(s, field string) ([]byte, error) {
	if s == "" {
		return nil, fmt.Errorf("%s is missing", field)
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%s is not unpadded base64url", field)
	}
	return b, nil
}

func b64Int(s, field string) (*big.Int, error) {
	b, err := b64Bytes(s, field)
	if err != nil {
		return nil, err
	}
	return new(big.Int).SetBytes(b), nil
}
