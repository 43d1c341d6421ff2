package zoo

import (
	"encoding/json"
	"errors"
)

func modelType(data []byte) (string, error) {
	var head struct {
		ModelType string `json:"model_type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return "", err
	}
	if head.ModelType == "" {
		return "", errors.New("config.json has no model_type")
	}
	return head.ModelType, nil
}
