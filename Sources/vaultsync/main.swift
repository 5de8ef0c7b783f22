print("vaultsync")
