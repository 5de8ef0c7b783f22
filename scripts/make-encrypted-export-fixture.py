#!/usr/bin/env python3
"""Writes Tests/VaultExchangeTests/Fixtures/bitwarden-encrypted.json: a password-protected Bitwarden
export of a small plain export, made independently of VaultSync's code with Python's `cryptography`
(PBKDF2-HMAC-SHA256 over the salt's base64 text, HKDF-Expand "enc"/"mac", AES-256-CBC with PKCS#7,
HMAC-SHA256 over IV || ciphertext; docs/PROTOCOL.md "Vault exports"). The test reads it back with the
password below. Fixed salt and IVs, so the file is reproducible: run it again and nothing changes."""
import base64, hashlib, hmac, json, os, uuid
from cryptography.hazmat.primitives import hashes, padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

PASSWORD = "fixture pässword"
ITERATIONS = 5000
SALT = base64.b64encode(bytes(range(16))).decode()

plain = {
    "encrypted": False,
    "folders": [{"id": "f1f1f1f1-0000-4000-8000-000000000001", "name": "Made in Python"}],
    "items": [{
        "passwordHistory": None, "revisionDate": "2025-01-02T03:04:05.006Z", "creationDate": "2025-01-02T03:04:05.006Z",
        "deletedDate": None, "id": "c1c1c1c1-0000-4000-8000-000000000001", "organizationId": None,
        "folderId": "f1f1f1f1-0000-4000-8000-000000000001", "type": 1, "reprompt": 0, "name": "Independent",
        "notes": "written by scripts/make-encrypted-export-fixture.py", "favorite": True,
        "login": {"fido2Credentials": [], "uris": [{"match": None, "uri": "https://independent.example"}],
                  "username": "py", "password": "s3cret, \"quoted\"", "totp": None},
        "collectionIds": None}],
}

master = hashlib.pbkdf2_hmac("sha256", PASSWORD.encode(), SALT.encode(), ITERATIONS, 32)
enc = HKDFExpand(hashes.SHA256(), 32, b"enc").derive(master)
mac = HKDFExpand(hashes.SHA256(), 32, b"mac").derive(master)

def encstring(plaintext: bytes, iv: bytes) -> str:
    padder = padding.PKCS7(128).padder()
    padded = padder.update(plaintext) + padder.finalize()
    encryptor = Cipher(algorithms.AES(enc), modes.CBC(iv)).encryptor()
    ciphertext = encryptor.update(padded) + encryptor.finalize()
    tag = hmac.new(mac, iv + ciphertext, hashlib.sha256).digest()
    b64 = lambda b: base64.b64encode(b).decode()
    return f"2.{b64(iv)}|{b64(ciphertext)}|{b64(tag)}"

document = {
    "encrypted": True, "passwordProtected": True, "salt": SALT, "kdfType": 0, "kdfIterations": ITERATIONS,
    "encKeyValidation_DO_NOT_EDIT": encstring(str(uuid.UUID(int=0x1234)).encode(), bytes([1] * 16)),
    "data": encstring(json.dumps(plain, indent=2).encode(), bytes([2] * 16)),
}
path = os.path.join(os.path.dirname(__file__), "..", "Tests", "VaultExchangeTests", "Fixtures", "bitwarden-encrypted.json")
with open(path, "w") as out:
    out.write(json.dumps(document, indent=2) + "\n")
print("wrote", os.path.normpath(path))
