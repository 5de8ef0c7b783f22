#!/usr/bin/env python3
"""P3 reference for VaultBench: what a Python client with `requests` + `cryptography` does for a full
sync of a vault: one GET /api/sync with the access token, then decrypt every item's EncStrings (the
item key with the user key, the fields with the item key). Run by VaultBench; reads
{"url", "token", "userKey" (base64 of the 64-byte user key)} as JSON on stdin and prints one JSON line.
Exits with status 3 when its Python packages are missing (Debian: python3-requests python3-cryptography).
"""
import base64
import json
import resource
import sys
import time

try:
    import requests
    from cryptography.hazmat.primitives import hashes, hmac, padding
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
except ImportError as error:  # the benchmark reports the reference as skipped, with this reason
    print(f"missing Python package: {error.name} (Debian: apt-get install python3-requests python3-cryptography)", file=sys.stderr)
    sys.exit(3)


def decrypt(text, enc_key, mac_key):
    """Type-2 EncString: 2.iv|ciphertext|mac, AES-256-CBC + HMAC-SHA256 (encrypt-then-MAC)."""
    kind, _, rest = text.partition(".")
    if kind != "2":
        raise ValueError("unsupported EncString type " + kind)
    iv, data, mac = (base64.b64decode(part) for part in rest.split("|"))
    check = hmac.HMAC(mac_key, hashes.SHA256())
    check.update(iv + data)
    check.verify(mac)
    decryptor = Cipher(algorithms.AES(enc_key), modes.CBC(iv)).decryptor()
    padded = decryptor.update(data) + decryptor.finalize()
    unpadder = padding.PKCS7(128).unpadder()
    return unpadder.update(padded) + unpadder.finalize()


def is_enc_string(value):
    return isinstance(value, str) and value.startswith("2.") and value.count("|") == 2


def decrypt_fields(value, enc_key, mac_key):
    """Decrypts every EncString below `value`; returns how many."""
    count = 0
    if isinstance(value, dict):
        for item in value.values():
            count += decrypt_fields(item, enc_key, mac_key)
    elif isinstance(value, list):
        for item in value:
            count += decrypt_fields(item, enc_key, mac_key)
    elif is_enc_string(value):
        decrypt(value, enc_key, mac_key).decode("utf-8")
        count += 1
    return count


def peak_rss_mib():
    """VmHWM on Linux (ru_maxrss survives execve, so it would include the spawning process's peak)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main():
    config = json.load(sys.stdin)
    user_key = base64.b64decode(config["userKey"])
    user_enc, user_mac = user_key[:32], user_key[32:]

    start = time.perf_counter()
    response = requests.get(config["url"] + "/api/sync?excludeDomains=true",
                            headers={"Authorization": "Bearer " + config["token"], "Accept": "application/json"})
    response.raise_for_status()
    ciphers = response.json()["ciphers"]
    fetched = time.perf_counter()

    fields = 0
    for cipher in ciphers:
        enc_key, mac_key = user_enc, user_mac
        item_key = cipher.get("key")
        if item_key:
            raw = decrypt(item_key, user_enc, user_mac)
            enc_key, mac_key = raw[:32], raw[32:]
        fields += decrypt_fields({k: v for k, v in cipher.items() if k != "key"}, enc_key, mac_key)
    decrypted = time.perf_counter()

    print(json.dumps({
        "fetchSeconds": fetched - start,
        "decryptSeconds": decrypted - fetched,
        "items": len(ciphers),
        "fields": fields,
        "peakRSSMiB": peak_rss_mib(),
    }))


if __name__ == "__main__":
    main()
