"""Engram's guard inside Hindsight: only service tokens that Engram signs, only for the banks they name.

`tokens` is shared by both sides (Engram signs, Hindsight verifies) and needs only PyJWT and
cryptography. `extension` is loaded by Hindsight itself and imports `hindsight_api`; Engram never
imports it.
"""
