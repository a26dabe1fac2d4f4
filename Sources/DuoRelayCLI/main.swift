print("duo-relay")
