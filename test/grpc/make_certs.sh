#!/usr/bin/env bash
# make_certs.sh DIR: the throwaway certificates of claims-grpc's tests, demo
# and benchmark, written to DIR (created if missing; existing files are
# replaced). EC P-256 keys, valid for two days.
#
#   ca.crt/key              the client and server CA (--client-ca, and what
#                           clients trust)
#   server.crt/key          the gateway's certificate, CN localhost,
#                           subjectAltName DNS:localhost and IP:127.0.0.1
#   cell-one, cell-two      client certificates (CN cell-one, cell-two)
#   claims-admin            client certificate, CN claims-admin
#   stranger                client certificate of the CA, CN stranger
#                           (not in any identity map)
#   foreign-ca, foreign     another CA and a client certificate it signed,
#                           CN cell-one (the right name, the wrong issuer)
#   new-ca, server-new      a second server CA and a server certificate it
#                           signed (the TLS reload test swaps it in)
set -eu

DIR="$1"
mkdir -p "$DIR"
cd "$DIR"
SERIAL=100

# A self-signed CA: make_ca STEM CN.
make_ca() {
    openssl req -x509 -new -nodes -days 2 \
        -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -subj "/CN=$2" \
        -addext 'basicConstraints=critical,CA:TRUE' \
        -addext 'keyUsage=critical,keyCertSign,cRLSign' \
        -keyout "$1.key" -out "$1.crt" 2>/dev/null
    chmod 600 "$1.key"
}

# A certificate signed by a CA: make_cert CA STEM CN EXTENSIONS.
make_cert() {
    SERIAL=$((SERIAL + 1))
    printf '%b' "$4" >"$2.ext"
    openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
        -subj "/CN=$3" -keyout "$2.key" -out "$2.csr" 2>/dev/null
    openssl x509 -req -in "$2.csr" -days 2 -CA "$1.crt" -CAkey "$1.key" \
        -set_serial "$SERIAL" -extfile "$2.ext" -out "$2.crt" 2>/dev/null
    chmod 600 "$2.key"
    rm -f "$2.csr" "$2.ext"
}

CLIENT='basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n'
SERVER='basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n'

make_ca ca 'claims-grpc test CA'
make_ca foreign-ca 'claims-grpc foreign CA'
make_ca new-ca 'claims-grpc second server CA'
make_cert ca server localhost "$SERVER"
make_cert new-ca server-new localhost "$SERVER"
make_cert ca cell-one cell-one "$CLIENT"
make_cert ca cell-two cell-two "$CLIENT"
make_cert ca claims-admin claims-admin "$CLIENT"
make_cert ca stranger stranger "$CLIENT"
make_cert foreign-ca foreign cell-one "$CLIENT"
