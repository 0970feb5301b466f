"""The consistency oracle: is a run's sink output what a failure-free run could produce?"""
